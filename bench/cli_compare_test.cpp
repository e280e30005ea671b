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

// Runs fak with `args`, from the directory `cwd` when given.
Ran Fak(const std::string& args, const std::string& cwd = "") {
  Ran r;
  const std::string cd = cwd.empty() ? "" : "cd '" + cwd + "' && ";
  FILE* p = popen((cd + std::string(FAK_BINARY) + " " + args + " 2>/dev/null").c_str(), "r");
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
  // Run from another directory: the default prompt set is found beside the binary (hardening item 12).
  Ran c =
      Fak(fmt::format("bench compare -m {} --arms fak:cpu,llama.cpp:{} --prompts 2 --ctx 8 --gen 4 -t 1 -q "
                      "--name cli --out {}",
                      fs::absolute(testing::kTinyModel).string(), crash, (root / "runs").string()),
          root.string());
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

// Three agents sharing a preamble through the real fak serve and the stand-in llama-server, both
// scenarios: two valid packets whose fleet sections show fak's later agents reading the preamble from
// its prefix cache; a tampered fleet summary is caught by validate.
TEST(BenchCli, FleetThroughRealServers) {
  const fs::path root = testing::TempRoot("fleet");
  Ran f =
      Fak(fmt::format("bench fleet -m {} --llama-server {} --agents 3 --preamble 40 --task 6 --gen 4 -t 1 "
                      "-q --name cli --out {}",
                      testing::kTinyModel, FAK_FAKE_LLAMA_SERVER, (root / "runs").string()));
  ASSERT_EQ(f.exit_code, 0) << f.out;
  std::vector<std::string> dirs;
  for (size_t at = 0; (at = f.out.find("run folder: ", at)) != std::string::npos; at += 12)
    dirs.push_back(f.out.substr(at + 12, f.out.find('\n', at) - at - 12));
  ASSERT_EQ(dirs.size(), 2u) << f.out;
  for (const std::string& dir : dirs) {
    EXPECT_EQ(Fak("bench validate " + dir).exit_code, 0) << dir;
    EXPECT_TRUE(fs::exists(fs::path(dir) / "report.md"));
    EXPECT_NE(testing::ReadText(fs::path(dir) / "report.md").find("## Fleet: "), std::string::npos);
    const auto p = nlohmann::json::parse(testing::ReadText(fs::path(dir) / "packet.json"));
    ASSERT_TRUE(p.contains("fleet")) << dir;
    const auto& fak = p["fleet"]["arms"]["fak-serve"];
    ASSERT_TRUE(fak.is_object()) << p["fleet"].dump();
    EXPECT_EQ(fak["agents"], 3);
    // The preamble's full KV pages (16 tokens each) come from the cache for every later agent.
    EXPECT_GE(fak["rest_cached_tokens_min"].get<int64_t>(), 32) << fak.dump();
    EXPECT_TRUE(p["fleet"]["arms"]["llama.cpp-server"].is_object());
    EXPECT_FALSE(p["fleet"]["ratios"].empty());
  }
  // Change one stated number: validation recomputes it from the raw samples.
  const fs::path packet = fs::path(dirs[0]) / "packet.json";
  auto p = nlohmann::json::parse(testing::ReadText(packet));
  p["fleet"]["arms"]["fak-serve"]["first_ttft_ms"]["p50"] = 0.001;
  testing::WriteText(packet, p.dump(1));
  Ran v = Fak("bench validate --json " + packet.string());
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_NE(v.out.find("fleet.arms.fak-serve.first_ttft_ms"), std::string::npos) << v.out;

  EXPECT_EQ(Fak("bench fleet -m x --agents 1").exit_code, 1);
  EXPECT_EQ(Fak(fmt::format("bench fleet -m {} --scenarios nope", testing::kTinyModel)).exit_code, 1);
  fs::remove_all(root);
}

}  // namespace
}  // namespace fak::bench
