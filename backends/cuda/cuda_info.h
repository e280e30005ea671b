// What the CUDA runtime sees. Compiled only when nvcc is found; callers check FAK_HAVE_CUDA.
#pragma once

#include <string>
#include <vector>

namespace fak::cuda {

struct DeviceInfo {
  std::string name;
  int major = 0;
  int minor = 0;
  size_t total_memory = 0;
};

// Runtime version of the CUDA library fak was built against, e.g. "13.0".
std::string CompiledRuntimeVersion();
// Installed driver version, or "" when no driver is present.
std::string DriverVersion();
// Every visible device; empty on a machine without a GPU (not an error).
std::vector<DeviceInfo> ListDevices();

}  // namespace fak::cuda
