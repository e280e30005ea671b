#include "ops/backend.h"

#include <algorithm>
#include <thread>

#include "backends/cpu/cpu_backend.h"  // CreateCpuBackend, CpuWeightLayout, StartError
#include "core/log.h"
#include "core/thread_pool.h"  // DefaultThreadCount
#ifdef FAK_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"  // CreateCudaBackend
#endif

namespace fak {

namespace {

// The thread count is capped at a few per CPU (ThreadCountFor); a thread the system refuses to start
// is an error.
Result<std::unique_ptr<Backend>> CreateCpu(int requested) {
  const int threads = ThreadCountFor(requested);
  std::unique_ptr<Backend> be = cpu::CreateCpuBackend({.threads = threads});
  if (be->threads() < threads) {
    return Busy("backend 'cpu': only {} of {} threads could start ({})", be->threads(), threads,
                cpu::StartError(*be));
  }
  return be;
}

}  // namespace

Result<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  if (options.name == "cpu") return CreateCpu(options.threads);
#ifdef FAK_HAVE_CUDA
  if (options.name == "cuda") return cuda::CreateCudaBackend();
  if (options.name == "auto") {
    auto gpu = cuda::CreateCudaBackend();
    if (gpu.ok()) return gpu;
    return CreateCpu(options.threads);
  }
#else
  if (options.name == "cuda") {
    return Unsupported("backend 'cuda': this fak was built without CUDA (no nvcc found)");
  }
  if (options.name == "auto") return CreateCpu(options.threads);
#endif
  return InvalidArgument("unknown backend '{}' (want cpu, cuda or auto)", options.name);
}

const WeightLayout& DefaultWeightLayout() { return cpu::CpuWeightLayout(); }

}  // namespace fak
