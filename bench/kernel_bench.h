// `fak bench kernels`: matrix-vector GB/s and matrix-matrix GOPS per weight format, printed next to
// the machine's measured memory read bandwidth and int8 peak, with the arithmetic. Every kernel is
// checked against the scalar reference before it is timed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "core/status.h"
#include "quant/ggml_type.h"  // GgmlType

namespace fak::bench {

struct KernelBenchOptions {
  int threads = 0;              // 0: DefaultThreadCount()
  std::vector<GgmlType> types;  // weight types to run (HasKernels); empty: all
  int64_t cols = 4096;          // row length for both benchmarks
  int64_t matmul_rows = 4096;
  int64_t matmul_tokens = 128;
  bool matvec = true;        // false: the matrix-matrix part only
  double min_seconds = 1.0;  // per measurement
  FILE* out = stdout;
};

Status RunKernelBench(const KernelBenchOptions& options);

// Last-level cache size in bytes from /sys/devices/system/cpu/cpu0/cache (0 if unknown).
int64_t LastLevelCacheBytes();

}  // namespace fak::bench
