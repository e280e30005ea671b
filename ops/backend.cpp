#include "ops/backend.h"

#include "backends/cpu/cpu_backend.h"  // CreateCpuBackend, CpuWeightLayout
#ifdef FAK_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"  // CreateCudaBackend
#endif

namespace fak {

Result<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  if (options.name == "cpu") return cpu::CreateCpuBackend({.threads = options.threads});
#ifdef FAK_HAVE_CUDA
  if (options.name == "cuda") return cuda::CreateCudaBackend();
  if (options.name == "auto") {
    auto gpu = cuda::CreateCudaBackend();
    if (gpu.ok()) return gpu;
    return cpu::CreateCpuBackend({.threads = options.threads});
  }
#else
  if (options.name == "cuda")
    return Unsupported("backend 'cuda': this fak was built without CUDA (no nvcc found)");
  if (options.name == "auto") return cpu::CreateCpuBackend({.threads = options.threads});
#endif
  return InvalidArgument("unknown backend '{}' (want cpu, cuda or auto)", options.name);
}

const WeightLayout& DefaultWeightLayout() { return cpu::CpuWeightLayout(); }

}  // namespace fak
