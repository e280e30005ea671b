// The CPU implementation of the Backend seam: today's kernel tables behind it, its thread pool
// private to it. Queued calls run at once on the calling thread and the pool; the first error is
// kept for the next Synchronize().
#pragma once

#include <memory>

#include "ops/backend.h"

namespace fak::cpu {

struct CpuBackendOptions {
  int threads = 0;  // 0: FAK_THREADS or every CPU this process may run on
  bool pin = true;  // workers pinned to distinct CPUs
};

std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options = {});
// The packed row-interleaved layout of backends/cpu/packed.h where the kernels read it faster.
const WeightLayout& CpuWeightLayout();
// Why a CPU backend runs fewer threads than it was asked for (the system refused one), or "".
std::string StartError(const Backend& cpu_backend);

}  // namespace fak::cpu
