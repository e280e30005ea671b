// Test helpers: a small real comparison on the tiny llama fixture, fake external engines (shell
// scripts that crash, hang or print garbage), and file edits for the validation tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "bench/compare.h"

namespace fak::bench::testing {

inline constexpr const char* kTinyModel = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";

inline std::filesystem::path TempRoot(const std::string& name) {
  // One folder per process: ctest runs test cases in parallel, each in its own process.
  const auto p =
      std::filesystem::temp_directory_path() / ("fak_bench_test_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

inline std::string FakeEngine(const std::filesystem::path& dir, const std::string& name,
                              const std::string& body) {
  const auto p = dir / name;
  std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
  std::filesystem::permissions(p, std::filesystem::perms::owner_all);
  return p.string();
}

inline CompareOptions TinyOptions(const std::filesystem::path& out_root, std::vector<std::string> arms) {
  CompareOptions o;
  o.model_path = kTinyModel;
  o.arms = std::move(arms);
  o.prompts = 3;
  o.ctx = 16;
  o.gen = 8;
  o.name = "tiny";
  o.out_root = out_root.string();
  o.threads = 1;
  o.fak_version = "fak test";
  o.quiet = true;
  return o;
}

inline std::string ReadText(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void WriteText(const std::filesystem::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}

}  // namespace fak::bench::testing
