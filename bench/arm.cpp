#include "bench/arm.h"

#include <filesystem>

namespace fak::bench {

ArmRun Arm::NewRun(const std::string& name, const std::string& engine) const {
  ArmRun r;
  r.spec = spec_;
  r.name = name;
  r.engine = engine;
  return r;
}

std::string ArmFileName(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  if (kind == "fak") return "fak-" + spec.substr(colon + 1);
  return kind;
}

Result<std::unique_ptr<Arm>> MakeArm(const std::string& spec) {
  const size_t colon = spec.find(':');
  if (colon == std::string::npos || colon + 1 == spec.size()) {
    return InvalidArgument(
        "arm '{}': expected KIND:ARG (fak:cpu, fak:cuda, llama.cpp:PATH, llama.cpp-server:PATH)", spec);
  }
  const std::string kind = spec.substr(0, colon), arg = spec.substr(colon + 1);
  if (kind == "fak") {
    if (arg != "cpu" && arg != "cuda") return InvalidArgument("arm '{}': fak runs on cpu or cuda", spec);
    return MakeFakArm(spec, arg);
  }
  if (kind == "llama.cpp") return MakeLlamaBenchArm(spec, arg);
  if (kind == "llama.cpp-server") return MakeLlamaServerArm(spec, arg);
  return InvalidArgument("arm '{}': unknown engine '{}' (fak, llama.cpp, llama.cpp-server)", spec, kind);
}

std::string RedactModelPath(const std::string& cmd, const std::string& model_path) {
  if (model_path.empty()) return cmd;
  const std::string name = std::filesystem::path(model_path).filename().string();
  std::string out = cmd;
  for (size_t pos = out.find(model_path); pos != std::string::npos;
       pos = out.find(model_path, pos + name.size())) {
    out.replace(pos, model_path.size(), name);
  }
  return out;
}

std::string JoinCommand(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    const bool quote = a.empty() || a.find_first_of(" \t\"'\\$") != std::string::npos;
    if (!quote) {
      s += a;
      continue;
    }
    s += '\'';
    for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
    s += '\'';
  }
  return s;
}

}  // namespace fak::bench
