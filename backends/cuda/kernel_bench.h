// `fak bench kernels --backend cuda`: the matrix-vector products of a decode step (one activation row,
// or a batch's rows) at real models' shapes, timed as they run in a step (a CUDA graph of back-to-back
// launches with programmatic dependent launch), with enough copies of each matrix cycled that every launch
// reads its weights from device memory, not L2. Printed as microseconds per product, GB/s of weights and the
// fraction of the device copy bandwidth measured in the same run, and (for batches) the multiply-adds'
// rate in TOPS. Settings of the environment (the
// kernels' FAK_CUDA_* switches) are compared in alternating rounds, and every setting's outputs are
// checked bit for bit against the first's (the kernels' correctness itself is cuda_backend_test's).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "core/status.h"
#include "quant/ggml_type.h"  // GgmlType

namespace fak::cuda {

constexpr int kMaxBatch = 512;  // a prefill chunk

struct CudaKernelBenchOptions {
  // Weight types: q8_0, q4_k, q6_k, f16, bf16. Empty: q8_0, q4_k, q6_k.
  std::vector<GgmlType> types;
  // "NAME:ROWS[+ROWS[+ROWS]]xCOLS": up to three matrices of one width in one launch, as q/k/v or
  // gate/up run. Empty: the products of the Qwen2.5-1.5B, Qwen2.5-7B and Qwen3.5-27B geometries.
  std::vector<std::string> shapes;
  // Each a comma-separated list of KEY=VALUE set while its graphs are captured; the default
  // environment always runs first, as the reference.
  std::vector<std::string> settings;
  // Activation rows per product: 1 is a decode step of one sequence; more, a batch (the kernels MatVec
  // picks for that many rows: the matrix-vector kernel, the small-batch or the large GEMM).
  int batch = 1;
  int rounds = 2;
  double min_seconds = 0.2;  // per measurement
  FILE* out = stdout;
};

// An error naming the shape, type or setting it cannot run, or the CUDA call that failed.
Status RunCudaKernelBench(const CudaKernelBenchOptions& options);

}  // namespace fak::cuda
