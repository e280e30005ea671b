#include "bench/hardware.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include <fmt/core.h>
#include <httplib.h>  // CPPHTTPLIB_VERSION
#include <openssl/crypto.h>
#include <openssl/opensslv.h>

#include "core/cpu_features.h"  // GetCpuFeatures
#if defined(FAK_HAVE_CUDA)
#include "backends/cuda/cuda_info.h"  // ListDevices, DriverVersion
#endif

namespace fak::bench {
namespace {

std::string ReadAll(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The value of "key : value" lines, first match.
std::string Field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "";
}

int PhysicalCores(const std::string& cpuinfo) {
  std::set<std::pair<std::string, std::string>> cores;
  std::istringstream in(cpuinfo);
  std::string line, phys;
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0) phys = line.substr(line.find(':') + 1);
    if (line.rfind("core id", 0) == 0) cores.insert({phys, line.substr(line.find(':') + 1)});
  }
  return static_cast<int>(cores.size());
}

std::string OsRelease() {
  const std::string text = ReadAll("/etc/os-release");
  std::string v = Field(text, "PRETTY_NAME");
  if (v.empty()) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("PRETTY_NAME=", 0) == 0) v = line.substr(12);
    }
  }
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

std::string CompilerVersion() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("g++ ") + __VERSION__;
#else
  return __VERSION__;
#endif
}

// The NVIDIA kernel driver's version line, when the driver is loaded (also without CUDA in fak).
[[maybe_unused]] std::string NvidiaProcDriver() {
  std::string v = ReadAll("/proc/driver/nvidia/version");
  return v.substr(0, v.find('\n'));
}

}  // namespace

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == 0) return "unknown-host";
  std::string h(buf);
  h = h.substr(0, h.find('.'));
  for (char& c : h) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return h;
}

std::string LoadAverage() {
  std::istringstream in(ReadAll("/proc/loadavg"));
  std::string a, b, c;
  in >> a >> b >> c;
  return a.empty() ? "unknown" : a + " " + b + " " + c;
}

nlohmann::json CollectHardware() {
  const std::string cpuinfo = ReadAll("/proc/cpuinfo");
  const std::string meminfo = ReadAll("/proc/meminfo");
  const CpuFeatures& cf = GetCpuFeatures();
  utsname u{};
  uname(&u);
  std::istringstream mem(Field(meminfo, "MemTotal"));
  uint64_t mem_kib = 0;
  mem >> mem_kib;
  nlohmann::json gpus = nlohmann::json::array();
  std::string driver;
#if defined(FAK_HAVE_CUDA)
  driver = cuda::DriverVersion();
  for (const auto& d : cuda::ListDevices()) {
    gpus.push_back({{"name", d.name},
                    {"compute_capability", fmt::format("{}.{}", d.major, d.minor)},
                    {"memory_bytes", d.total_memory}});
  }
#else
  driver = NvidiaProcDriver();
#endif
  return {
      {"host", HostName()},
      {"cpu",
       {{"model", cf.model_name},
        {"logical_cores", cf.logical_cores},
        {"physical_cores", PhysicalCores(cpuinfo)},
        {"features", cf.ToString()}}},
      {"memory_bytes", mem_kib * 1024},
      {"gpu",
       {{"devices", gpus},
        {"driver", driver.empty() ? nlohmann::json(nullptr) : nlohmann::json(driver)},
#if defined(FAK_HAVE_CUDA)
        {"cuda_runtime", cuda::CompiledRuntimeVersion()},
        {"note", gpus.empty() ? "fak built with CUDA, no device visible" : ""}
#else
        {"cuda_runtime", nullptr},
        {"note", "fak built without CUDA: devices not probed"}
#endif
       }},
      {"os", {{"name", OsRelease()}, {"kernel", fmt::format("{} {} {}", u.sysname, u.release, u.machine)}}},
      {"compiler", CompilerVersion()},
      {"libraries",
       {{"fmt", fmt::format("{}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100)},
        {"nlohmann_json", fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
                                      NLOHMANN_JSON_VERSION_PATCH)},
        {"openssl", OpenSSL_version(OPENSSL_VERSION)},
        {"cpp_httplib", CPPHTTPLIB_VERSION}}},
  };
}

}  // namespace fak::bench
