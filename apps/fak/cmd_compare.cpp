// fak bench compare | validate | report: head-to-head runs of fak and other engines on the same
// model and prompts, the validation of their packets, and a readable report of a run folder.
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "apps/fak/commands.h"
#include "apps/fak/version.h"
#include "bench/compare.h"
#include "bench/report.h"
#include "bench/validate.h"

namespace fak::cli {
namespace {

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// The command as it ran, rebuilt from the parsed values (so defaults are recorded too).
std::vector<std::string> CommandLine(const bench::CompareOptions& o, const std::string& arms) {
  std::vector<std::string> c = {"fak",
                                "bench",
                                "compare",
                                "--model",
                                o.model_path,
                                "--arms",
                                arms,
                                "--prompts",
                                std::to_string(o.prompts),
                                "--ctx",
                                std::to_string(o.ctx),
                                "--gen",
                                std::to_string(o.gen),
                                "--name",
                                o.name,
                                "--threads",
                                std::to_string(o.threads)};
  if (!o.reference.empty()) c.insert(c.end(), {"--reference", o.reference});
  if (!o.tokenizer_path.empty()) c.insert(c.end(), {"--tokenizer", o.tokenizer_path});
  c.insert(c.end(),
           {"--prompt-set", o.prompt_set_path, "--arm-timeout", fmt::format("{:g}", o.arm_timeout_seconds)});
  return c;
}

}  // namespace

void RegisterBenchCompare(CLI::App* bench_cmd, Context& ctx) {
  auto* cmp = bench_cmd->add_subcommand(
      "compare", "Run fak and other engines on the same model and prompts; write a validated run folder");
  static bench::CompareOptions o;
  static std::string arms;
  static bool report = true;
  cmp->add_option("-m,--model", o.model_path, "GGUF model file (every arm loads this file)")->required();
  cmp->add_option("--arms", arms,
                  "Comma-separated arms: fak:cpu, fak:cuda, llama.cpp:PATH/llama-bench, "
                  "llama.cpp-server:PATH/llama-server")
      ->required();
  cmp->add_option("--prompts", o.prompts, "Prompts from the versioned set (one more is the warm-up)");
  cmp->add_option("--ctx", o.ctx, "Prompt tokens per request (prompts are fitted to exactly this many)");
  cmp->add_option("--gen", o.gen, "Generated tokens per request (greedy, EOS ignored)");
  cmp->add_option("--name", o.name, "Run name, the suffix of the run folder");
  cmp->add_option("--reference", o.reference, "Arm the others are compared with (default: the first)");
  cmp->add_option("--prompt-set", o.prompt_set_path, "Prompt set (JSONL)");
  cmp->add_option("--tokenizer", o.tokenizer_path,
                  "Tokenizer for fitting the prompts (default: the model's)");
  cmp->add_option("--out", o.out_root,
                  "Root of run folders (by-machine/<host>/<UTC time>-<name>/ is made in it)");
  cmp->add_option("-t,--threads", o.threads, "Threads for every arm (default: FAK_THREADS or all CPUs)");
  cmp->add_option("--arm-timeout", o.arm_timeout_seconds, "Seconds an external engine may take in all");
  cmp->add_option("--startup-timeout", o.startup_timeout_seconds,
                  "Seconds a server may take to answer /health");
  cmp->add_option("--request-timeout", o.request_timeout_seconds, "Seconds one server request may take");
  cmp->add_flag("!--no-report", report, "Skip report.md and the SVG charts");
  cmp->add_flag("-q,--quiet", o.quiet, "No progress lines");
  cmp->callback([&ctx]() {
    o.arms.clear();
    for (size_t pos = 0; pos <= arms.size();) {
      size_t comma = arms.find(',', pos);
      if (comma == std::string::npos) comma = arms.size();
      if (comma > pos) o.arms.push_back(arms.substr(pos, comma - pos));
      pos = comma + 1;
    }
    o.fak_version = FirstLine(VersionText());
    o.command_line = CommandLine(o, arms);
    auto out = bench::RunCompare(o);
    if (!out.ok()) {
      ctx.exit_code = Fail("bench compare: " + out.status().ToString());
      return;
    }
    const bench::ValidationReport v = bench::ValidatePacket(out->packet_path);
    fmt::print("run folder: {}\npacket: {} ({})\n", out->run_dir, out->packet_path,
               v.valid ? "valid, sha256 " + v.packet_sha256 : "INVALID");
    for (const auto& s : v.violations) fmt::print(stderr, "violation: {}\n", s);
    if (!v.valid) {
      ctx.exit_code = Fail("bench compare: the packet it wrote does not validate");
      return;
    }
    if (report) {
      auto files = bench::WriteReport(out->run_dir);
      if (!files.ok()) {
        ctx.exit_code = Fail("bench report: " + files.status().ToString());
        return;
      }
      fmt::print("report: {}\n", (std::filesystem::path(out->run_dir) / "report.md").string());
    }
    if (out->failed_arms > 0) {
      fmt::print(stderr, "fak: bench compare: {} arm(s) failed; see the packet\n", out->failed_arms);
      ctx.exit_code = 3;
    }
  });

  auto* val =
      bench_cmd->add_subcommand("validate", "Check a packet: schema, file digests, internal consistency");
  static std::string packet;
  static bool as_json = false;
  val->add_option("PACKET", packet, "packet.json, or the run folder holding it")->required();
  val->add_flag("--json", as_json, "Print only the validation JSON (violations included)");
  val->callback([&ctx]() {
    std::string path = packet;
    if (std::filesystem::is_directory(path)) path = (std::filesystem::path(path) / "packet.json").string();
    const bench::ValidationReport v = bench::ValidatePacket(path);
    auto j = v.ToJson();
    if (!as_json) j.erase("violations");
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    if (!as_json) {
      for (const auto& s : v.violations) fmt::print(stderr, "violation: {}\n", s);
    }
    if (!v.valid) ctx.exit_code = 1;
  });

  auto* rep = bench_cmd->add_subcommand("report", "Write report.md and SVG charts into a run folder");
  static std::string run_dir;
  rep->add_option("RUN_DIR", run_dir, "Run folder (holding packet.json)")->required();
  rep->callback([&ctx]() {
    auto files = bench::WriteReport(run_dir);
    if (!files.ok()) {
      ctx.exit_code = Fail("bench report: " + files.status().ToString());
      return;
    }
    for (const auto& f : *files) fmt::print("{}\n", (std::filesystem::path(run_dir) / f).string());
  });
}

}  // namespace fak::cli
