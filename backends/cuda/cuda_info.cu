#include "backends/cuda/cuda_info.h"

#include <cuda_runtime.h>

#include <fmt/format.h>

namespace fak::cuda {

std::string CompiledRuntimeVersion() {
  return fmt::format("{}.{}", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
}

std::string DriverVersion() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) return "";
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::vector<DeviceInfo> ListDevices() {
  std::vector<DeviceInfo> out;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return out;
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out.push_back(DeviceInfo{p.name, p.major, p.minor, p.totalGlobalMem});
  }
  return out;
}

}  // namespace fak::cuda
