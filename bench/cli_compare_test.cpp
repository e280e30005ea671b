// The `fak bench compare | validate | report` commands through the real binary: output lines, exit
// codes and files.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "bench/test_run_util.h"

namespace fak::bench {
namespace {

namespace fs = std::filesystem;

struct Ran {
  int exit_code = -1;
  std::string out;  // stdout only
};

Ran Fak(const std::string& args) {
  Ran r;
  FILE* p = popen((std::string(FAK_BINARY) + " " + args + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

TEST(BenchCli, CompareValidateReport) {
  const fs::path root = testing::TempRoot("cli");
  const std::string crash = testing::FakeEngine(root, "crash-bench", "echo boom >&2; exit 7");
  Ran c =
      Fak(fmt::format("bench compare -m {} --arms fak:cpu,llama.cpp:{} --prompts 2 --ctx 8 --gen 4 -t 1 -q "
                      "--name cli --out {}",
                      testing::kTinyModel, crash, (root / "runs").string()));
  EXPECT_EQ(c.exit_code, 3) << c.out;  // complete packet, one failed arm
  const size_t at = c.out.find("run folder: ");
  ASSERT_NE(at, std::string::npos) << c.out;
  const std::string dir = c.out.substr(at + 12, c.out.find('\n', at) - at - 12);
  EXPECT_NE(c.out.find("(valid, sha256 "), std::string::npos);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "report.md"));

  Ran v = Fak("bench validate " + dir + "/packet.json");
  EXPECT_EQ(v.exit_code, 0);
  const auto j = nlohmann::json::parse(v.out);
  EXPECT_EQ(v.out.rfind(
                "{\"schema\":\"fak.bench.comparison.validation.v1\",\"valid\":true,\"packet_sha256\":\"", 0),
            0u)
      << v.out;
  EXPECT_EQ(j["packet_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(Fak("bench validate " + dir).exit_code, 0);  // the folder works too

  testing::WriteText(fs::path(dir) / "llama.cpp-quality.json", "{}");
  v = Fak("bench validate --json " + dir + "/packet.json");
  EXPECT_EQ(v.exit_code, 1);
  const auto bad = nlohmann::json::parse(v.out);
  EXPECT_EQ(bad["valid"], false);
  ASSERT_TRUE(bad["violations"].is_array());
  EXPECT_NE(bad["violations"][0].get<std::string>().find("llama.cpp-quality.json"), std::string::npos);

  Ran r = Fak("bench report " + dir);
  EXPECT_EQ(r.exit_code, 1);  // an invalid packet gets no report
  EXPECT_EQ(Fak("bench compare -m x --arms nope:1").exit_code, 1);
  EXPECT_EQ(Fak("bench validate /nonexistent/packet.json").exit_code, 1);
  fs::remove_all(root);
}

}  // namespace
}  // namespace fak::bench
