// Runs the real `fak` binary: what its commands print and write for good input (cli_hardening_test.cpp:
// bad and hostile input).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "apps/fak/cli_test_util.h"
#include "formats/gguf.h"
#include "formats/gguf_test_util.h"

namespace fak_cli_test {
namespace {

TEST(FakCli, Version) {
  RunResult r = RunFak("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("fak 0."), std::string::npos);
  EXPECT_NE(r.output.find("commit"), std::string::npos);
  EXPECT_NE(r.output.find("cpu backends:"), std::string::npos);
  EXPECT_NE(r.output.find("gpu backends:"), std::string::npos);
}

TEST(FakCli, InspectGgufTextAndJson) {
  const std::string model = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";
  RunResult t = RunFak("inspect " + model);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_NE(t.output.find("blk.1.ffn_down.weight"), std::string::npos);
  EXPECT_NE(t.output.find("q8_0"), std::string::npos);
  EXPECT_NE(t.output.find("totals:"), std::string::npos);
  RunResult j = RunFak("inspect --json --digest " + model);
  ASSERT_EQ(j.exit_code, 0) << j.output;
  auto doc = nlohmann::json::parse(j.output);
  EXPECT_EQ(doc["format"], "gguf");
  EXPECT_EQ(doc["metadata"]["general.architecture"], "llama");
  EXPECT_EQ(doc["metadata"]["tokenizer.ggml.tokens"]["length"], 32000);
  EXPECT_EQ(doc["sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(doc["totals"]["tensors"], doc["tensors"].size());
  EXPECT_EQ(doc["model"]["n_layer"], 2);
}

TEST(FakCli, InspectHfCheckpoint) {
  fs::path dir = TempDir() / "hf";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 10, "tie_word_embeddings": true})";
  nlohmann::json h = {
      {"model.embed_tokens.weight", {{"dtype", "BF16"}, {"shape", {10, 64}}, {"data_offsets", {0, 1280}}}}};
  std::string hs = h.dump();
  std::vector<uint8_t> b(8);
  uint64_t n = hs.size();
  std::memcpy(b.data(), &n, 8);
  b.insert(b.end(), hs.begin(), hs.end());
  b.resize(b.size() + 1280, 0);
  WriteBytes(dir / "model.safetensors", b);
  RunResult r = RunFak("inspect --json --digest " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto doc = nlohmann::json::parse(r.output);
  EXPECT_EQ(doc["format"], "huggingface");
  EXPECT_EQ(doc["model"]["arch"], "qwen2");
  EXPECT_EQ(doc["tensors"][0]["type"], "BF16");
  EXPECT_EQ(doc["shards"][0]["sha256"].get<std::string>().size(), 64u);
}

TEST(FakCli, RunMatchesLlamaCppGreedyAndDumpsLogits) {
  const std::string model = "../shared/fixtures/llamacpp-tiny/tiny-llama-f16.gguf";
  const fs::path npy = TempDir() / "logits.npy";
  RunResult r =
      RunFak("run -m " + model + " -p 'Once upon a time' -n 16 --no-special --print-ids -t 2 --dump-logits " +
             npy.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in("../shared/fixtures/llamacpp-tiny/expected/f16-p1.json");
  auto want = nlohmann::json::parse(in);
  const size_t at = r.output.find("{\"output_ids\"");
  ASSERT_NE(at, std::string::npos) << r.output;
  auto got = nlohmann::json::parse(r.output.substr(at, r.output.find('\n', at) - at));
  EXPECT_EQ(got["prompt_ids"], want["prompt_ids"]);
  EXPECT_EQ(got["output_ids"], want["greedy_ids"]);
  EXPECT_EQ(fs::file_size(npy), 128 + 16u * 32000u * 4u);
}

// --json-schema and --grammar on the trained model: the output parses and follows the schema; a bad
// grammar or schema is refused by name before anything is generated.
TEST(FakCli, RunConstrainedOutput) {
  const std::string model = "models/qwen3-20m/qwen3-20m-q8_0.gguf";
  const fs::path schema = TempDir() / "schema.json";
  std::ofstream(schema) << R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
      "n": {"type": "integer", "minimum": 1, "maximum": 9}, "ok": {"enum": [true, "maybe"]}},
      "required": ["name", "n", "ok"], "additionalProperties": false})";
  RunResult r =
      RunFak("run -m " + model + " -p 'A record as JSON:' -n 200 -t 2 --json-schema " + schema.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stop: grammar"), std::string::npos) << r.output;
  const std::string text = r.output.substr(0, r.output.find("\nfak: prompt"));
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j.size(), 3u);
  EXPECT_LE(j["name"].get<std::string>().size(), 12u);
  EXPECT_TRUE(j["n"].get<int>() >= 1 && j["n"].get<int>() <= 9);
  EXPECT_TRUE(j["ok"] == true || j["ok"] == "maybe");
  const fs::path g = TempDir() / "yn.gbnf";
  std::ofstream(g) << "root ::= (\"yes\" | \"no\") \".\"\n";
  RunResult yn = RunFak("run -m " + model + " -p 'Is it?' -n 20 -t 2 --grammar " + g.string());
  ASSERT_EQ(yn.exit_code, 0) << yn.output;
  EXPECT_TRUE(yn.output.rfind("yes.\n", 0) == 0 || yn.output.rfind("no.\n", 0) == 0) << yn.output;
  const fs::path bad = TempDir() / "bad.gbnf";
  std::ofstream(bad) << "root ::= answer\n";
  RunResult b = RunFak("run -m " + model + " -p hi --grammar " + bad.string());
  EXPECT_EQ(b.exit_code, 1);
  EXPECT_NE(b.output.find("rule 'answer' is used but never defined"), std::string::npos) << b.output;
  const fs::path unsupported = TempDir() / "unsupported.json";
  std::ofstream(unsupported) << R"({"type": "array", "uniqueItems": true})";
  RunResult u = RunFak("run -m " + model + " -p hi --json-schema " + unsupported.string());
  EXPECT_EQ(u.exit_code, 1);
  EXPECT_NE(u.output.find("'uniqueItems' is not supported"), std::string::npos) << u.output;
  RunResult both =
      RunFak("run -m " + model + " -p hi --json-schema " + schema.string() + " --grammar " + g.string());
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.output.find("not both"), std::string::npos) << both.output;
}

TEST(FakCli, PerplexityJsonAndRefusals) {
  const std::string model = "models/qwen3-20m/qwen3-20m-q8_0.gguf";
  RunResult r = RunFak("perplexity -m " + model +
                       " -f tests/fixtures/text/heldout-debian.txt -c 128 --chunks 3 -t 2 "
                       "--json --kl-base " +
                       model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j["chunks"], 3);
  EXPECT_EQ(j["scored"], 3 * 63);
  EXPECT_GT(j["ppl"].get<double>(), 1.0);
  EXPECT_EQ(j["top1_agreement"], 1.0);
  EXPECT_NEAR(j["kl_mean"].get<double>(), 0.0, 1e-9);
  RunResult shortt = RunFak("perplexity -m " + model + " -f models/qwen3-20m/README.md -c 4096 -t 2");
  EXPECT_EQ(shortt.exit_code, 1);
  EXPECT_NE(shortt.output.find("perplexity with a context of 4096 needs at least 8192"), std::string::npos)
      << shortt.output;
}

// fak bench: tokens/s per test and thread count, and beside every decode number the weights' read rate
// and its share of the bandwidth the backend measured in the same run (JSON and the table); prefill
// rows have neither; --no-roofline skips the measurement.
TEST(FakCli, BenchSetsDecodeAgainstTheMeasuredBandwidth) {
  const std::string model = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";
  RunResult j = RunFak("bench -m " + model + " -p 8 -n 4 -r 1 -t 1,2 --json");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const auto docs = nlohmann::json::parse(j.output.substr(j.output.find('[')));
  ASSERT_EQ(docs.size(), 2u);
  for (const auto& d : docs) {
    const double bw = d["bandwidth_gb_per_second"].get<double>();
    EXPECT_GT(bw, 0.0);
    EXPECT_EQ(d["bandwidth_kind"], "streaming read");
    ASSERT_EQ(d["results"].size(), 2u);
    const auto& pp = d["results"][0];
    const auto& tg = d["results"][1];
    EXPECT_EQ(pp["test"], "pp8");
    EXPECT_EQ(pp["fraction_of_bandwidth"].get<double>(), 0.0);
    EXPECT_EQ(tg["test"], "tg4");
    EXPECT_GT(tg["tokens_per_second"].get<double>(), 0.0);
    EXPECT_NEAR(tg["fraction_of_bandwidth"].get<double>(), tg["weight_gb_per_second"].get<double>() / bw,
                1e-9);
    EXPECT_NEAR(tg["weight_gb_per_second"].get<double>(),
                tg["tokens_per_second"].get<double>() * d["decode_step_bytes"].get<double>() / 1e9, 1e-6);
  }
  RunResult t = RunFak("bench -m " + model + " -p 0 -n 4 -r 1 -t 1");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_NE(t.output.find("| weights GB/s | of bandwidth |"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("bandwidth (1 threads): "), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("% |"), std::string::npos) << t.output;
  RunResult none = RunFak("bench -m " + model + " -p 0 -n 4 -r 1 -t 1 --no-roofline --json");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  const auto nd = nlohmann::json::parse(none.output.substr(none.output.find('{')));
  EXPECT_EQ(nd["bandwidth_gb_per_second"].get<double>(), 0.0);
  EXPECT_EQ(nd["results"][0]["fraction_of_bandwidth"].get<double>(), 0.0);
}

// llama.cpp's flag meanings (hardening item 11): -n -1 runs to the end of the context, --seed -1 and
// the default print the random seed, -e processes escapes, -c beyond the trained context warns, and
// command-line errors (unknown options, -p with -f, bad values) exit 2 with a message naming them.
TEST(FakCli, FlagsFollowLlamaCpp) {
  const std::string model = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";
  RunResult ngl = RunFak("run -m " + model + " -p hi -n 4 -ngl 99");
  EXPECT_EQ(ngl.exit_code, 2) << ngl.output;
  EXPECT_NE(ngl.output.find("unknown option -ngl"), std::string::npos) << ngl.output;
  RunResult both = RunFak("run -m " + model + " -p hi -f /dev/null");
  EXPECT_EQ(both.exit_code, 2) << both.output;
  EXPECT_NE(both.output.find("excludes"), std::string::npos) << both.output;
  for (const char* bad :
       {"--seed 18446744073709551616", "--seed -2", "--seed 1x", "-n -2", "--logit-bias 5",
        "--logit-bias x+1", "--logit-bias 5+", "--logit-bias 5+1e99", "--logit-bias 99999+1"}) {
    RunResult r = RunFak("run -m " + model + " -p hi " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
  }
  RunResult bias = RunFak("run -m " + model + " -p hi -n 3 -t 2 --no-special --print-ids -l 42+100");
  ASSERT_EQ(bias.exit_code, 0) << bias.output;
  EXPECT_NE(bias.output.find("\"output_ids\":[42,42,42]"), std::string::npos) << bias.output;
  RunResult neg = RunFak("run -m " + model + " -p '-dash' -n 2 -t 2 --no-special");  // a value, not a flag
  EXPECT_EQ(neg.exit_code, 0) << neg.output;
  // -n -1: until the context (here 24 positions) is full.
  RunResult all =
      RunFak("run -m " + model + " -p 'Once upon a time' -n -1 -c 24 -t 2 --no-special --print-ids");
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_NE(all.output.find("stop: context"), std::string::npos) << all.output;
  // A random seed is printed, and giving it back repeats the run.
  RunResult r1 = RunFak("run -m " + model + " -p hi -n 12 -t 2 --temp 1 --no-special --print-ids");
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  const size_t at = r1.output.find("fak: seed ");
  ASSERT_NE(at, std::string::npos) << r1.output;
  const std::string seed = r1.output.substr(at + 10, r1.output.find('\n', at) - at - 10);
  RunResult r2 =
      RunFak("run -m " + model + " -p hi -n 12 -t 2 --temp 1 --no-special --print-ids --seed " + seed);
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  auto ids = [](const std::string& out) {
    const size_t at = out.find("{\"output_ids\"");
    return at == std::string::npos ? "(no ids) " + out : out.substr(at);
  };
  EXPECT_EQ(ids(r1.output), ids(r2.output));
  // -e: "a\tb" becomes a tab, which tokenizes differently from the backslash and the letter.
  RunResult raw = RunFak("run -m " + model + " -p 'a\\tb' -n 0 -t 2 --no-special --print-ids");
  RunResult esc = RunFak("run -m " + model + " -p 'a\\tb' -e -n 0 -t 2 --no-special --print-ids");
  RunResult tab = RunFak("run -m " + model + " -p \"$(printf 'a\\tb')\" -n 0 -t 2 --no-special --print-ids");
  ASSERT_EQ(esc.exit_code, 0) << esc.output;
  EXPECT_NE(ids(raw.output), ids(esc.output));
  EXPECT_EQ(ids(tab.output), ids(esc.output));
  RunResult quiet = RunFak("run -m " + model + " -p hi -n 1 -t 2");  // default: the trained 2048
  EXPECT_EQ(quiet.output.find("warning"), std::string::npos) << quiet.output;
  RunResult wide = RunFak("run -m " + model + " -p hi -n 1 -t 2 -c 100000");
  EXPECT_EQ(wide.exit_code, 0) << wide.output;
  EXPECT_NE(wide.output.find("exceeds the model's trained context"), std::string::npos) << wide.output;
  RunResult help = RunFak("run --help");
  EXPECT_NE(help.output.find("INT=128"), std::string::npos) << help.output;  // defaults are shown
}

// fak chat through stdin (hardening items 10 and 17): commands are not sent to the model, /save and
// /load keep a conversation, a message too long for the context is refused and the conversation goes
// on, older turns are dropped when the context fills, a model without a template needs --chat-template.
TEST(FakCli, ChatThroughStdin) {
  const std::string model = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";
  const fs::path dir = TempDir();
  const fs::path saved = dir / "conv.json", in = dir / "chat-in.txt";
  std::ofstream(in) << "/help\nhello there\n/save " << saved.string() << "\n/clear\n/load " << saved.string()
                    << "\n/load /nonexistent.json\n/bogus\n//slash\n/quit\nnever read\n";
  RunResult r =
      RunFak("chat -m " + model + " --chat-template chatml -n 8 -t 2 -s 'Be brief.' < " + in.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("/save FILE"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("saved 3 messages"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("conversation cleared"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("loaded 3 messages"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(conversation unchanged)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("unknown command /bogus"), std::string::npos) << r.output;
  const auto conv = nlohmann::json::parse(std::ifstream(saved));
  ASSERT_EQ(conv.size(), 3u);
  EXPECT_EQ(conv[0]["role"], "system");
  EXPECT_EQ(conv[1]["content"], "hello there");
  EXPECT_EQ(conv[2]["role"], "assistant");
  // Two replies: "hello there" and "/slash"; the help and commands were not sent.
  size_t stats = 0;
  for (size_t at = r.output.find("fak: prompt "); at != std::string::npos;
       at = r.output.find("fak: prompt ", at + 1)) {
    ++stats;
  }
  EXPECT_EQ(stats, 2u) << r.output;

  std::ofstream(in, std::ios::trunc) << "one two three four five six seven\neight nine ten eleven twelve\n"
                                     << std::string(400, 'x') << "\nthirteen fourteen\n";
  RunResult fill =
      RunFak("chat -m " + model + " --chat-template chatml -n 8 -c 64 -t 2 --no-stats < " + in.string());
  ASSERT_EQ(fill.exit_code, 0) << fill.output;
  // The first turn goes whole (the message and its reply), named by role and text.
  EXPECT_NE(
      fill.output.find("dropped the 2 oldest messages to fit the context of 64 tokens: user \"one two three "
                       "four five six seven\", assistant \""),
      std::string::npos)
      << fill.output;
  EXPECT_NE(fill.output.find("message not sent:"), std::string::npos) << fill.output;
  EXPECT_EQ(fill.output.find("fak: prompt "), std::string::npos) << fill.output;  // --no-stats

  RunResult none = RunFak("chat -m " + model + " -n 8 < " + in.string());
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_NE(none.output.find("--chat-template"), std::string::npos) << none.output;
  // --chat-template also takes a file with a Jinja template.
  const fs::path tmpl = dir / "turns.jinja";
  std::ofstream(tmpl) << "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
                         "{% if add_generation_prompt %}[assistant] {% endif %}";
  std::ofstream(in, std::ios::trunc) << "hello\n";
  RunResult file =
      RunFak("chat -m " + model + " --chat-template " + tmpl.string() + " -n 4 -t 2 < " + in.string());
  EXPECT_EQ(file.exit_code, 0) << file.output;
  EXPECT_NE(file.output.find("fak: prompt "), std::string::npos) << file.output;  // a reply was generated
}

// Ctrl-C while a reply is written stops that reply, and the conversation goes on (item 10).
TEST(FakCli, ChatInterruptStopsOnlyTheReply) {
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    dup2(from_child[1], 2);
    close(to_child[1]);
    close(from_child[0]);
    execl(FAK_BINARY, FAK_BINARY, "chat", "-m", "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf",
          "--chat-template", "chatml", "-c", "16384", "-n", "8000", "-t", "1", nullptr);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  auto say = [&](const std::string& s) {
    ASSERT_EQ(write(to_child[1], s.data(), s.size()), static_cast<ssize_t>(s.size()));
  };
  std::string out;
  bool eof = false;
  // Reads into out until `want` is in it (empty: until end of file), the child closes its end, or
  // `seconds` pass. The tiny model's replies are random tokens and may hold any byte, so no byte can
  // serve as a sentinel.
  auto read_until = [&](const std::string& want, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while ((want.empty() || out.find(want) == std::string::npos) && !eof &&
           std::chrono::steady_clock::now() < end) {
      char buf[4096];
      struct timeval tv = {0, 100000};
      fd_set fds;
      FD_ZERO(&fds);
      FD_SET(from_child[0], &fds);
      // A signal may interrupt select or read (EINTR): go on waiting; only end of file ends the loop.
      if (select(from_child[0] + 1, &fds, nullptr, nullptr, &tv) > 0) {
        const ssize_t n = read(from_child[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          eof = true;
          break;
        }
        out.append(buf, static_cast<size_t>(n));
      }
    }
    return !want.empty() && out.find(want) != std::string::npos;
  };
  say("tell me a very long story\n");
  const size_t before = out.size();
  // Wait for some of the reply (past the warning line), then interrupt it.
  EXPECT_TRUE(read_until("context of 2048 tokens\n", 60));
  const auto start = std::chrono::steady_clock::now();
  while (out.size() < before + 200 && !eof &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
    read_until("", 0.1);
  }
  kill(pid, SIGINT);
  EXPECT_TRUE(read_until("reply stopped (Ctrl-C)", 60)) << out;
  say("and another\n");
  close(to_child[1]);  // end of input after the second message: chat ends normally
  int status = 0;
  read_until("", 120);  // drain until the child closes its end
  EXPECT_TRUE(eof) << "the chat did not end within 120 s";
  pid_t waited;
  do {
    waited = waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  EXPECT_EQ(waited, pid);
  close(from_child[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << out;
  size_t stats = 0;
  for (size_t at = out.find("fak: prompt "); at != std::string::npos; at = out.find("fak: prompt ", at + 1))
    ++stats;
  EXPECT_EQ(stats, 2u) << out;  // the interrupted reply and the second one
}

// fak run writes the continuation byte for byte as llama.cpp's CLI does (hardening item 9): the same
// prompts as Detokenizer.StreamsWhatLlamaCppStreams (mid-word, after a space, after a newline, inside a
// multi-byte character), through the model whose greedy ids equal llama.cpp's (the F16 file), compared
// with the bytes llama.cpp wrote (tests/fixtures/tokenizer/llamacpp_stream.json).
TEST(FakCli, RunStreamsWhatLlamaCppStreams) {
  const auto doc = nlohmann::json::parse(std::ifstream("tests/fixtures/tokenizer/llamacpp_stream.json"));
  const auto& m = doc["models"][0];
  ASSERT_EQ(m["model"], "../shared/fixtures/llamacpp-tiny/tiny-llama-f16.gguf");
  int checked = 0;
  for (const auto& c : m["cases"]) {
    if (c["forced"].get<bool>()) continue;
    const std::string hex = c["prompt_hex"], text_hex = c["text_hex"];
    std::string prompt, want;  // the prompt as -e escapes, so any byte passes the shell
    for (size_t i = 0; i + 1 < hex.size(); i += 2) prompt += "\\x" + hex.substr(i, 2);
    for (size_t i = 0; i + 1 < text_hex.size(); i += 2) {
      want.push_back(static_cast<char>(std::stoi(text_hex.substr(i, 2), nullptr, 16)));
    }
    const std::string cmd = std::string(FAK_BINARY) + " run -m " + m["model"].get<std::string>() +
                            " -e -p '" + prompt + "' -n 16 --temp 0 -t 2 2>/dev/null";
    const RunResult r = RunShell(cmd);
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_EQ(r.output, want + "\n") << "prompt " << hex;
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(FakCli, TokenizeAndTemplate) {
  RunResult t = RunFak("tokenize -m ../shared/fixtures/vocab/ggml-vocab-gpt-2.gguf --ids 'Hello world'");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_EQ(nlohmann::json::parse(t.output), nlohmann::json::parse("[15496, 995]"));
  fs::path msgs = TempDir() / "messages.json";
  std::ofstream(msgs) << R"([{"role": "user", "content": "Hi"}])";
  RunResult c = RunFak("template -m ../shared/fixtures/tokenizers/qwen3 -f " + msgs.string() +
                       " --add-generation-prompt");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(c.output, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  RunResult both = RunFak("template -m ../shared/fixtures/tokenizers/qwen3 -f " + msgs.string() +
                          " --add-generation-prompt --no-generation-prompt");
  EXPECT_EQ(both.exit_code, 2) << both.output;
  RunResult unknown = RunFak("template -m ../shared/fixtures/tokenizers/qwen3 -f " + msgs.string() +
                             " --template-name tool_use");
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  EXPECT_NE(unknown.output.find("none named 'tool_use'"), std::string::npos) << unknown.output;
}

// fak quantize --tokenizer writes the given tokenizer instead of the input's, and refuses one larger
// than the model's vocabulary (hardening item 12).
TEST(FakCli, QuantizeWithAnotherTokenizer) {
  const fs::path out = TempDir() / "retok.gguf";
  const std::string in = "../shared/fixtures/llamacpp-tiny/tiny-llama-f16.gguf";
  RunResult q = RunFak("quantize " + in + " " + out.string() +
                       " q8_0 --tokenizer ../shared/fixtures/tokenizers/llama2");
  ASSERT_EQ(q.exit_code, 0) << q.output;
  RunResult a = RunFak("tokenize -m " + out.string() + " --ids 'Hello world'");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(nlohmann::json::parse(a.output), nlohmann::json::parse("[1, 15043, 3186]"));
  RunResult big = RunFak("quantize " + in + " " + (TempDir() / "big.gguf").string() +
                         " q8_0 --tokenizer ../shared/fixtures/tokenizers/qwen3");
  EXPECT_EQ(big.exit_code, 1) << big.output;
  EXPECT_NE(big.output.find("151669 tokens, more than the model's vocab_size 32000"), std::string::npos)
      << big.output;
  EXPECT_FALSE(fs::exists(TempDir() / "big.gguf"));
  RunResult none = RunFak("quantize " + in + " " + (TempDir() / "none.gguf").string() +
                          " q8_0 --tokenizer /nonexistent/tokenizer.json");
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_NE(none.output.find("loading --tokenizer"), std::string::npos) << none.output;
}

}  // namespace
}  // namespace fak_cli_test
