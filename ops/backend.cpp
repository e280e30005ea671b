#include "ops/backend.h"

#include "backends/cpu/cpu_backend.h"  // CreateCpuBackend, CpuWeightLayout

namespace fak {

Result<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  if (options.name == "cpu") return cpu::CreateCpuBackend({.threads = options.threads});
  if (options.name == "cuda") {
    return Unsupported("backend 'cuda': the CUDA backend has no forward pass yet (use --backend cpu)");
  }
  return InvalidArgument("unknown backend '{}' (want cpu)", options.name);
}

const WeightLayout& DefaultWeightLayout() { return cpu::CpuWeightLayout(); }

}  // namespace fak
