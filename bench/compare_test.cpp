// External engines that crash, hang or print garbage become failed arms with their stderr tail;
// the other arms still complete and the packet still validates.
#include "bench/compare.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/report.h"
#include "bench/test_run_util.h"
#include "bench/validate.h"
#include "core/timer.h"

namespace fak::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(Compare, BrokenExternalEnginesAreFailedArms) {
  const fs::path root = testing::TempRoot("compare_broken");
  const std::string crash =
      testing::FakeEngine(root, "crash-bench", "echo 'ggml: out of memory at layer 3' >&2; exit 134");
  const std::string garbage =
      testing::FakeEngine(root, "garbage-bench", "echo '<<<not json>>>'; echo warn >&2");
  const std::string binary =
      testing::FakeEngine(root, "binary-bench", "printf 'bad \\377\\376 bytes\\n' >&2; exit 1");
  const std::string hang = testing::FakeEngine(root, "hang-bench", "echo 'loading...' >&2; sleep 100");
  const std::string dead_server =
      testing::FakeEngine(root, "dead-server", "echo 'error: unknown argument' >&2; exit 1");
  const std::string mute_server =
      testing::FakeEngine(root, "mute-server", "echo 'listening soon' >&2; exec sleep 100");
  const std::string wrong_json =
      testing::FakeEngine(root, "wrong-json-bench", "echo '[{\"n_prompt\": 5, \"n_gen\": 0}]'");
  CompareOptions o = testing::TinyOptions(
      root / "runs",
      {"fak:cpu", "llama.cpp:" + crash, "llama.cpp:" + garbage, "llama.cpp:" + hang,
       "llama.cpp-server:" + dead_server, "llama.cpp-server:" + mute_server, "llama.cpp:" + wrong_json,
       "llama.cpp:/nonexistent/llama-bench", "fak:cuda", "llama.cpp:" + binary});
  o.arm_timeout_seconds = 1.5;
  o.startup_timeout_seconds = 1.5;
  Timer t;
  auto out = RunCompare(o);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_LT(t.Seconds(), 20);
  EXPECT_EQ(out->failed_arms, 9);
  const ValidationReport v = ValidatePacket(out->packet_path);
  EXPECT_TRUE(v.valid) << (v.violations.empty() ? "" : v.violations[0]);

  const json p = json::parse(testing::ReadText(out->packet_path));
  std::map<std::string, json> arms;
  for (const auto& a : p["arms"]) arms[a["name"]] = a;
  ASSERT_EQ(arms.size(), 10u);
  EXPECT_EQ(arms["fak-cpu"]["status"], "ok");
  EXPECT_EQ(arms["fak-cpu"]["quality"]["verdict"], "reference");

  EXPECT_EQ(arms["llama.cpp"]["status"], "failed");
  EXPECT_EQ(arms["llama.cpp"]["reason"], "llama-bench exit status 134");
  EXPECT_EQ(arms["llama.cpp"]["stderr_tail"], "ggml: out of memory at layer 3\n");
  EXPECT_EQ(arms["llama.cpp"]["quality"]["verdict"], "arm-failed");

  EXPECT_NE(arms["llama.cpp-2"]["reason"].get<std::string>().find("no valid JSON"), std::string::npos);
  EXPECT_NE(arms["llama.cpp-2"]["reason"].get<std::string>().find("<<<not json>>>"), std::string::npos);
  EXPECT_EQ(arms["llama.cpp-2"]["stderr_tail"], "warn\n");

  EXPECT_NE(arms["llama.cpp-3"]["reason"].get<std::string>().find("timed out"), std::string::npos);
  EXPECT_EQ(arms["llama.cpp-3"]["stderr_tail"], "loading...\n");

  EXPECT_NE(
      arms["llama.cpp-server"]["reason"].get<std::string>().find("exit status 1 before answering /health"),
      std::string::npos)
      << arms["llama.cpp-server"]["reason"];
  EXPECT_EQ(arms["llama.cpp-server"]["stderr_tail"], "error: unknown argument\n");

  EXPECT_NE(arms["llama.cpp-server-2"]["reason"].get<std::string>().find("did not answer /health"),
            std::string::npos);
  EXPECT_EQ(arms["llama.cpp-server-2"]["stderr_tail"], "listening soon\n");

  EXPECT_NE(arms["llama.cpp-4"]["reason"].get<std::string>().find("no test with n_prompt 16"),
            std::string::npos)
      << arms["llama.cpp-4"]["reason"];
  EXPECT_NE(arms["llama.cpp-5"]["reason"].get<std::string>().find("cannot start /nonexistent/llama-bench"),
            std::string::npos);
  EXPECT_NE(arms["fak-cuda"]["reason"].get<std::string>().find("CUDA"), std::string::npos);
  // Invalid UTF-8 on stderr is kept as U+FFFD, so the files stay JSON.
  EXPECT_EQ(arms["llama.cpp-6"]["stderr_tail"], "bad \ufffd\ufffd bytes\n");
  EXPECT_TRUE(p["ratios"].empty());  // no second arm measured anything

  auto files = WriteReport(out->run_dir);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  const std::string md = testing::ReadText(fs::path(out->run_dir) / "report.md");
  EXPECT_NE(md.find("## Failed arms"), std::string::npos);
  EXPECT_NE(md.find("ggml: out of memory at layer 3"), std::string::npos);
  fs::remove_all(root);
}

TEST(Compare, FakeLlamaBenchOutputIsParsed) {
  const fs::path root = testing::TempRoot("compare_fake_bench");
  // Answers like llama-bench: the pp run (-n 0) and the tg run (-p 0) with 3 samples each.
  const std::string bench = testing::FakeEngine(
      root, "llama-bench",
      "case \" $* \" in\n"
      "  *' -n 0 '*) echo '[{\"build_commit\":\"abc1234\",\"build_number\":42,\"n_prompt\":16,\"n_gen\":0,"
      "\"samples_ns\":[2000000,4000000,8000000]}]' ;;\n"
      "  *) echo '[{\"build_commit\":\"abc1234\",\"build_number\":42,\"n_prompt\":0,\"n_gen\":8,"
      "\"samples_ns\":[80000000,100000000,160000000]}]' ;;\n"
      "esac");
  CompareOptions o = testing::TinyOptions(root / "runs", {"fak:cpu", "llama.cpp:" + bench});
  auto out = RunCompare(o);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->failed_arms, 0);
  const ValidationReport v = ValidatePacket(out->packet_path);
  EXPECT_TRUE(v.valid) << (v.violations.empty() ? "" : v.violations[0]);
  const json p = json::parse(testing::ReadText(out->packet_path));
  const json& a = p["arms"][1];
  EXPECT_EQ(a["version"], "build 42 (abc1234)");
  EXPECT_TRUE(a["metrics"]["ttft_ms"].is_null());
  EXPECT_EQ(a["metrics"]["prefill_tps"]["p50"], 4000.0);  // 16 tokens / 4 ms
  EXPECT_EQ(a["metrics"]["decode_tps"]["p50"], 80.0);     // 8 tokens / 100 ms
  EXPECT_EQ(a["quality"]["verdict"], "not-measured");
  EXPECT_EQ(a["decomposition"]["total_ms"], 2 + 4 + 8 + 80 + 100 + 160.0);
  // Ratios only for the throughput metrics both arms measured.
  EXPECT_EQ(p["ratios"].size(), 2u);
  const json m = json::parse(testing::ReadText(fs::path(out->run_dir) / "manifest.json"));
  const std::string cmd = m["arms"][1]["commands"][0];
  EXPECT_NE(cmd.find(" -m tiny-llama-q8_0.gguf -p 16 -n 0 -r 3 -o json -t 1"), std::string::npos) << cmd;
  EXPECT_EQ(cmd.find("../shared"), std::string::npos);  // the model is recorded by file name
  fs::remove_all(root);
}

TEST(Compare, ServerArmTimesStreamedTokens) {
  const fs::path root = testing::TempRoot("compare_server");
  const std::string fake = FAK_FAKE_LLAMA_SERVER;
  const std::string ok = testing::FakeEngine(root, "ok-server", "exec " + fake + " \"$@\"");
  const std::string garbage =
      testing::FakeEngine(root, "garbage-server", "exec " + fake + " --mode garbage \"$@\"");
  const std::string shorter =
      testing::FakeEngine(root, "short-server", "exec " + fake + " --mode short \"$@\"");
  const std::string drop = testing::FakeEngine(root, "drop-server", "exec " + fake + " --mode drop \"$@\"");
  const std::string crash =
      testing::FakeEngine(root, "crash-server", "exec " + fake + " --mode crash \"$@\"");
  CompareOptions o =
      testing::TinyOptions(root / "runs", {"fak:cpu", "llama.cpp-server:" + ok, "llama.cpp-server:" + garbage,
                                           "llama.cpp-server:" + shorter, "llama.cpp-server:" + crash,
                                           "llama.cpp-server:" + drop});
  o.startup_timeout_seconds = 20;
  o.request_timeout_seconds = 5;
  auto out = RunCompare(o);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const ValidationReport v = ValidatePacket(out->packet_path);
  EXPECT_TRUE(v.valid) << (v.violations.empty() ? "" : v.violations[0]);
  const json p = json::parse(testing::ReadText(out->packet_path));
  const json& a = p["arms"][1];
  ASSERT_EQ(a["status"], "ok") << a["reason"] << a["stderr_tail"];
  EXPECT_EQ(a["version"], "1 (fake)");
  EXPECT_EQ(a["metrics"]["ttft_ms"]["n"], 3);
  EXPECT_EQ(a["metrics"]["itl_ms"]["n"], 3 * 7);
  EXPECT_GE(a["metrics"]["itl_ms"]["p50"].get<double>(), 0.9);  // the fake sleeps 1 ms between tokens
  EXPECT_DOUBLE_EQ(a["metrics"]["prefill_tps"]["p50"].get<double>(), 16 / 2.5e-3);  // the server's timings
  EXPECT_EQ(a["quality"]["verdict"], "fail");  // it answers prompt[i] + 1, not what the model says
  EXPECT_EQ(a["quality"]["token_matches"], 0);
  const json raw = json::parse(testing::ReadText(fs::path(out->run_dir) / "llama.cpp-server-raw.json"));
  const json& d = raw["requests"][0]["decomposition_ms"];
  EXPECT_DOUBLE_EQ(d["prefill"].get<double>(), 2.5);
  EXPECT_NEAR(d["setup"].get<double>() + d["prefill"].get<double>(),
              raw["requests"][0]["ttft_ms"].get<double>(), 1e-9);
  const json q = json::parse(testing::ReadText(fs::path(out->run_dir) / "llama.cpp-server-quality.json"));
  EXPECT_EQ(q["prompts"][0]["first_mismatch"], 0);
  const json m = json::parse(testing::ReadText(fs::path(out->run_dir) / "manifest.json"));
  const std::string cmd = m["arms"][1]["commands"][0];
  EXPECT_NE(cmd.find(" -m tiny-llama-q8_0.gguf --host 127.0.0.1 --port "), std::string::npos) << cmd;
  EXPECT_NE(cmd.find(" -c 24 -t 1 -np 1"), std::string::npos) << cmd;

  EXPECT_EQ(p["arms"][2]["status"], "failed");
  EXPECT_NE(p["arms"][2]["reason"].get<std::string>().find("stream event is not JSON"), std::string::npos);
  EXPECT_NE(p["arms"][3]["reason"].get<std::string>().find("returned 7 tokens, expected 8"),
            std::string::npos);
  EXPECT_NE(p["arms"][4]["reason"].get<std::string>().find("POST /completion"), std::string::npos);
  EXPECT_NE(p["arms"][4]["stderr_tail"].get<std::string>().find("GGML_ASSERT: fake failure"),
            std::string::npos);
  // The drop arm: every request's stream ends with an error event after 3 tokens; the arm asks for the
  // rest with the prompt extended by the tokens so far, so each request completes with one recovery
  // whose time is measured and whose boundary gives no inter-token sample.
  const json& dropped = p["arms"][5];
  ASSERT_EQ(dropped["status"], "ok") << dropped["reason"];
  EXPECT_EQ(dropped["metrics"]["ttft_ms"]["n"], 3);
  EXPECT_EQ(dropped["metrics"]["itl_ms"]["n"], 3 * (2 + 4));  // 3 tokens then 5: 2 + 4 gaps per request
  const json draw =
      json::parse(testing::ReadText(fs::path(out->run_dir) / dropped["files"]["raw"].get<std::string>()));
  ASSERT_EQ(draw["requests"].size(), 3u);
  for (const json& req : draw["requests"]) {
    EXPECT_EQ(req["recoveries"], 1) << req.dump();
    EXPECT_EQ(req["tokens"].size(), 8u) << req.dump();
    EXPECT_GT(req["decomposition_ms"]["recovery"].get<double>(), 0.0) << req.dump();
    EXPECT_NE(req["notes"].dump().find("output parser failed"), std::string::npos) << req.dump();
  }
  fs::remove_all(root);
}

TEST(Compare, BadOptionsAreErrors) {
  const fs::path root = testing::TempRoot("compare_bad");
  CompareOptions o = testing::TinyOptions(root, {"vllm:/x"});
  auto r = RunCompare(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown engine 'vllm'"), std::string::npos);
  o = testing::TinyOptions(root, {"fak:cpu"});
  o.prompts = 100;
  EXPECT_NE(RunCompare(o).status().message().find("--prompts"), std::string::npos);
  o = testing::TinyOptions(root, {"fak:cpu"});
  o.gen = 1;
  EXPECT_NE(RunCompare(o).status().message().find("--gen"), std::string::npos);
  o = testing::TinyOptions(root, {"fak:cpu"});
  o.reference = "llama.cpp";
  EXPECT_NE(RunCompare(o).status().message().find("--reference"), std::string::npos);
  o = testing::TinyOptions(root, {"fak:cpu"});
  o.name = "../up";
  EXPECT_FALSE(RunCompare(o).ok());
  fs::remove_all(root);
}

}  // namespace
}  // namespace fak::bench
