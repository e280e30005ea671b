#include "apps/fak/version.h"

#include "fak_git_commit.h"  // FAK_GIT_COMMIT, generated at build time

#include <fmt/format.h>

#include "core/cpu_features.h"
#ifdef FAK_HAVE_CUDA
#include "backends/cuda/cuda_info.h"
#endif

namespace fak::cli {

std::string VersionText() {
  std::string s = fmt::format("fak {} (commit {})\n", FAK_VERSION, FAK_GIT_COMMIT);
  s += fmt::format("compiler: {}\n", __VERSION__);
#if defined(__x86_64__)
  s += "cpu backends: scalar avx2 avx512 (compiled)\n";
#elif defined(__aarch64__)
  s += "cpu backends: scalar neon (compiled)\n";
#else
  s += "cpu backends: scalar (compiled)\n";
#endif
  s += fmt::format("cpu: {} ({} threads): {}\n", GetCpuFeatures().model_name, GetCpuFeatures().logical_cores,
                   GetCpuFeatures().ToString());
#ifdef FAK_HAVE_CUDA
  s += fmt::format("gpu backends: cuda {} (compiled for sm_{})\n", cuda::CompiledRuntimeVersion(),
                   FAK_CUDA_ARCHS);
  auto devices = cuda::ListDevices();
  if (devices.empty()) {
    s += "gpu: none visible\n";
  } else {
    for (const auto& d : devices) {
      s += fmt::format("gpu: {} (sm_{}{}, {:.1f} GiB), driver {}\n", d.name, d.major, d.minor,
                       static_cast<double>(d.total_memory) / (1ull << 30), cuda::DriverVersion());
    }
  }
#else
  s += "gpu backends: none (built without CUDA)\n";
#endif
  return s;
}

}  // namespace fak::cli
