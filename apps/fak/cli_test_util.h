// Helpers of the tests that run the real `fak` binary (cli_test.cpp, cli_hardening_test.cpp).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/test_temp_dir.h"

namespace fak_cli_test {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout (RunFak: and stderr)
};

// Runs a shell command line; output is what it writes to stdout.
inline RunResult RunShell(const std::string& cmd) {
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline RunResult RunFak(const std::string& args) {
  return RunShell(std::string(FAK_BINARY) + " " + args + " 2>&1");
}

inline fs::path TempDir() {
  static const fak::TestTempDir dir("fak_cli_test_");
  return dir.path();
}

inline void WriteBytes(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<long>(b.size()));
}

}  // namespace fak_cli_test
