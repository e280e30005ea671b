// fak bench fleet: agents sharing a preamble through fak serve (and llama-server) over HTTP; one
// validated comparison packet per scenario (see bench/fleet.h).
#include <unistd.h>

#include <climits>
#include <filesystem>

#include <fmt/format.h>

#include "apps/fak/commands.h"
#include "apps/fak/version.h"
#include "bench/fleet.h"
#include "bench/report.h"
#include "bench/validate.h"

namespace fak::cli {
namespace {

// This binary, relative to the working directory when it lies below it: the path is run, and it is
// also what the packets record, which should not name the directories of the machine they ran on.
std::string SelfPath() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  const std::filesystem::path exe(std::string(buf, static_cast<size_t>(n)));
  std::error_code ec;
  const std::filesystem::path rel = std::filesystem::proximate(exe, ec);
  if (ec || rel.empty() || *rel.begin() == "..") return exe.string();
  return rel.string();
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos <= s.size();) {
    size_t end = s.find(sep, pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

}  // namespace

void RegisterBenchFleet(CLI::App* bench_cmd, Context& ctx) {
  auto* cmd = bench_cmd->add_subcommand(
      "fleet", "Agents sharing a preamble through fak serve and llama-server over HTTP (comparison packets)");
  static bench::FleetOptions o;
  static std::string scenarios = "sequential,burst", serve_args;
  static bool report = true;
  cmd->add_option("-m,--model", o.model_path, "GGUF model file (both servers load it)")->required();
  cmd->add_option("--llama-server", o.llama_server_path, "llama-server binary (omit: fak alone)");
  cmd->add_option("--agents", o.agents, "Agents (llama-server gets as many slots)");
  cmd->add_option("--preamble", o.preamble_tokens, "Tokens of the shared preamble");
  cmd->add_option("--task", o.task_tokens, "Tokens of each agent's own task");
  cmd->add_option("--gen", o.gen, "Tokens each agent generates (greedy, EOS ignored)");
  cmd->add_option("--rounds", o.rounds, "Rounds (arms alternate their order round by round)");
  cmd->add_option("--scenarios", scenarios, "sequential, burst, or both (comma-separated)");
  cmd->add_option("-t,--threads", o.threads, "Threads for both servers (default: FAK_THREADS or all CPUs)");
  cmd->add_option("--serve-args", serve_args, "More flags for fak serve (space-separated)");
  cmd->add_option("--name", o.name, "Run name; the folders are NAME-SCENARIO");
  cmd->add_option("--prompt-set", o.prompt_set_path, "Prompt set (JSONL)");
  cmd->add_option("--tokenizer", o.tokenizer_path, "Tokenizer (default: the model file's own)");
  cmd->add_option("--out", o.out_root, "Root of the run folders");
  cmd->add_option("--request-timeout", o.request_timeout_seconds, "Seconds one agent's request may take");
  cmd->add_option("--startup-timeout", o.startup_timeout_seconds, "Seconds a server may take to load");
  cmd->add_flag("--report,!--no-report", report, "Write report.md and SVG charts into each run folder");
  cmd->add_flag("-q,--quiet", o.quiet, "No progress lines");
  cmd->callback([&ctx]() {
    o.fak_path = SelfPath();
    o.scenarios = Split(scenarios, ',');
    o.serve_args = Split(serve_args, ' ');
    o.fak_version = VersionText().substr(0, VersionText().find('\n'));
    o.command_line = {"fak",
                      "bench",
                      "fleet",
                      "--model",
                      o.model_path,
                      "--agents",
                      std::to_string(o.agents),
                      "--preamble",
                      std::to_string(o.preamble_tokens),
                      "--task",
                      std::to_string(o.task_tokens),
                      "--gen",
                      std::to_string(o.gen),
                      "--rounds",
                      std::to_string(o.rounds),
                      "--scenarios",
                      scenarios,
                      "--threads",
                      std::to_string(o.threads)};
    if (!o.llama_server_path.empty())
      o.command_line.insert(o.command_line.end(), {"--llama-server", o.llama_server_path});
    if (!serve_args.empty()) o.command_line.insert(o.command_line.end(), {"--serve-args", serve_args});
    auto outs = bench::RunFleet(o);
    if (!outs.ok()) {
      ctx.exit_code = Fail("bench fleet: " + outs.status().ToString());
      return;
    }
    int failed = 0;
    for (const auto& out : *outs) {
      const bench::ValidationReport v = bench::ValidatePacket(out.packet_path);
      fmt::print("run folder: {}\npacket: {} ({})\n", out.run_dir, out.packet_path,
                 v.valid ? "valid, sha256 " + v.packet_sha256 : "INVALID");
      for (const auto& s : v.violations) fmt::print(stderr, "violation: {}\n", s);
      if (!v.valid) {
        ctx.exit_code = Fail("bench fleet: a packet it wrote does not validate");
        return;
      }
      if (report) {
        auto files = bench::WriteReport(out.run_dir);
        if (!files.ok()) {
          ctx.exit_code = Fail("bench report: " + files.status().ToString());
          return;
        }
        fmt::print("report: {}\n", (std::filesystem::path(out.run_dir) / "report.md").string());
      }
      failed += out.failed_arms;
    }
    if (failed > 0) {
      fmt::print(stderr, "fak: bench fleet: {} arm run(s) failed; see the packets\n", failed);
      ctx.exit_code = 3;
    }
  });
}

}  // namespace fak::cli
