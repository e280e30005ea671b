// `fak_bench_kernels --model`: every weight matrix of a model geometry (distinct per layer, packed, in
// one huge-page arena as the engine holds them) run through cpu::MatMul the way a forward pass calls
// it: one decode token, then a prefill batch. The result is the matrix-multiply share of a step, an
// upper bound on tokens per second to set against llama.cpp's end-to-end figures.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/status.h"

namespace fak::bench {

struct ModelBenchOptions {
  std::string geometry = "qwen2.5-1.5b";  // the only one so far
  std::string quant = "q8_0";             // "q8_0" or "q4_k_m" (q4_k with q6_k where llama.cpp puts it)
  int threads = 0;                        // 0: DefaultThreadCount()
  int64_t prefill_tokens = 256;
  int decode_reps = 16;
  int prefill_reps = 3;
  bool packed = true;
  FILE* out = stdout;
};

Status RunModelBench(const ModelBenchOptions& options);

}  // namespace fak::bench
