// fak bench: llama-bench style throughput. ppN prefills N tokens into an empty context; tgN decodes N
// tokens one at a time from an empty context. Each test runs once to warm up, then -r times; the
// report gives mean ± stddev in tokens/s and, for decode, the weights' read rate against the memory
// bandwidth the backend measures first (Backend::MeasureBandwidth), plus load time and peak RSS.
// fak bench kernels: the CPU kernel roofline benchmark; with --backend cuda, the CUDA matrix-vector
// products at real models' shapes against the device copy bandwidth.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/fak/commands.h"
#include "apps/fak/flag_lists.h"
#include "apps/fak/model_flags.h"
#include "backends/cpu/kernels.h"  // IsaName, Kernels
#include "bench/kernel_bench.h"    // RunKernelBench
#include "core/cpu_features.h"
#include "core/timer.h"
#include "engine/session.h"
#include "quant/ggml_type.h"  // GgmlTypeFromName
#ifdef FAK_HAVE_CUDA
#include "backends/cuda/kernel_bench.h"  // RunCudaKernelBench
#endif

namespace fak::cli {
namespace {

struct Stats {
  double mean = 0, stddev = 0;
  std::vector<double> samples;
};

Stats Summarize(std::vector<double> v) {
  Stats s;
  s.samples = v;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(s.stddev / static_cast<double>(v.size() - 1)) : 0;
  return s;
}

double PeakRssMiB() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// Token ids for benchmarking: deterministic, spread over the vocabulary.
std::vector<int32_t> BenchTokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t x = 0x2545F4914F6CDD1Dull;
  for (auto& id : t) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    id = static_cast<int32_t>(x % static_cast<uint64_t>(std::min<int64_t>(vocab, 32000)));
  }
  return t;
}

Result<double> TimeOne(Session& s, const std::string& kind, int64_t n, int64_t vocab) {
  std::vector<float> logits(static_cast<size_t>(vocab));
  auto toks = BenchTokens(n, vocab);
  s.Truncate(0);
  Timer t;
  if (kind == "pp") {
    FAK_RETURN_IF_ERROR(s.Prefill(toks, logits.data()));
  } else {
    for (int32_t id : toks) FAK_RETURN_IF_ERROR(s.Step(id, logits.data()));
  }
  return static_cast<double>(n) / t.Seconds();
}

}  // namespace

void RegisterBenchCompare(CLI::App* bench_cmd, Context& ctx);  // cmd_compare.cpp
void RegisterBenchBatch(CLI::App* bench_cmd, Context& ctx);    // cmd_bench_batch.cpp
void RegisterBenchFleet(CLI::App* bench_cmd, Context& ctx);    // cmd_bench_fleet.cpp
void RegisterBenchGrammar(CLI::App* bench_cmd, Context& ctx);  // cmd_bench_grammar.cpp

void RegisterBench(CLI::App& app, Context& ctx) {
  auto* cmd =
      app.add_subcommand("bench", "Throughput: prefill (ppN) and decode (tgN) tokens/s, like llama-bench");
  static ModelFlags mf;
  static std::string pp = "512", tg = "128";
  static int reps = 5;
  static bool as_json = false;
  mf.Add(cmd);
  cmd->get_option("--model")->required(false);
  // -t takes a list here, like llama-bench: every test runs at each thread count.
  static std::string thread_list;
  cmd->remove_option(cmd->get_option("--threads"));
  cmd->add_option("-t,--threads", thread_list,
                  "Threads, comma-separated, e.g. 1,2,4,8,16 (default: FAK_THREADS or all CPUs)");
  cmd->add_option("-p,--n-prompt", pp, "Prefill sizes, comma-separated (0 to skip)");
  cmd->add_option("-n,--n-gen", tg, "Decode lengths, comma-separated (0 to skip)");
  cmd->add_option("-r,--repetitions", reps, "Timed repetitions per test");
  cmd->add_flag("--json", as_json, "Print JSON");
  static bool no_roofline = false;
  cmd->add_flag("--no-roofline", no_roofline,
                "Skip measuring the memory bandwidth that decode numbers are set against");

  auto* kern =
      cmd->add_subcommand("kernels", "CPU kernel GB/s and GOPS against measured bandwidth and int8 peak");
  static bench::KernelBenchOptions ko;
  kern->add_option("-t,--threads", ko.threads, "Threads");
  kern->add_option("--seconds", ko.min_seconds, "Minimum seconds per measurement");
  static std::vector<std::string> kern_types;
  kern->add_option("--type", kern_types, "Weight types to run (repeatable; default: all)");
  kern->add_option("--cols", ko.cols, "Row length (a multiple of 256)");
  kern->add_option("--rows", ko.matmul_rows, "Rows of the matrix-matrix benchmark");
  kern->add_option("--tokens", ko.matmul_tokens, "Tokens of the matrix-matrix benchmark");
  static bool matmul_only = false;
  kern->add_flag("--matmul-only", matmul_only, "Skip the matrix-vector part");
  static std::string kern_backend = "cpu";
  kern->add_option("--backend", kern_backend, "cpu, or cuda: the GPU's matrix-vector products");
  static std::vector<std::string> kern_shapes, kern_settings;
  static int kern_rounds = 2;
  kern->add_option(
      "--shape", kern_shapes,
      "cuda: NAME:ROWS[+ROWS]xCOLS, matrices of one launch (repeatable; default: 1.5B, 7B, 27B)");
  kern->add_option("--setting", kern_settings,
                   "cuda: KEY=VALUE[,KEY=VALUE] of the environment to compare with the default (repeatable)");
  kern->add_option("--rounds", kern_rounds, "cuda: alternating rounds over the settings");
  static int kern_batch = 1;
  kern->add_option("--batch", kern_batch,
                   "cuda: activation rows per product (1: a decode step of one sequence)");
  kern->callback([&ctx, kern]() {
    ko.types.clear();
    for (const std::string& name : kern_types) {
      const auto t = GgmlTypeFromName(name);
      if (!t) {
        ctx.exit_code = UsageError("bench kernels: unknown --type '" + name + "'");
        return;
      }
      ko.types.push_back(*t);
    }
    if (kern_backend == "cuda") {
#ifdef FAK_HAVE_CUDA
      cuda::CudaKernelBenchOptions co;
      co.types = ko.types;
      co.shapes = kern_shapes;
      co.settings = kern_settings;
      co.rounds = kern_rounds;
      co.batch = kern_batch;
      if (kern->count("--seconds") > 0) co.min_seconds = ko.min_seconds;
      if (Status s = cuda::RunCudaKernelBench(co); !s.ok()) {
        // A shape, type or setting it cannot take is a command-line error; the rest happened running.
        ctx.exit_code =
            s.code() == StatusCode::kInvalidArgument ? UsageError(s.message()) : Fail(s.ToString());
      }
#else
      ctx.exit_code = Fail("bench kernels --backend cuda: this build of fak has no CUDA backend");
#endif
      return;
    }
    if (kern_backend != "cpu") {
      ctx.exit_code = UsageError("bench kernels: --backend is cpu or cuda, not '" + kern_backend + "'");
      return;
    }
    if (!kern_shapes.empty() || !kern_settings.empty() || kern->count("--batch") > 0) {
      ctx.exit_code = UsageError("bench kernels: --shape, --setting and --batch are for --backend cuda");
      return;
    }
    ko.matvec = !matmul_only;
    Status s = bench::RunKernelBench(ko);
    if (!s.ok()) ctx.exit_code = Fail(s.ToString());
  });

  RegisterBenchCompare(cmd, ctx);
  RegisterBenchBatch(cmd, ctx);
  RegisterBenchFleet(cmd, ctx);
  RegisterBenchGrammar(cmd, ctx);

  cmd->callback([cmd, &ctx]() {
    if (!cmd->get_subcommands().empty()) return;  // kernels, batch, compare, validate, report
    if (mf.model.empty()) {
      ctx.exit_code = UsageError("bench: give -m MODEL (or use `fak bench kernels`)");
      return;
    }
    if (reps < 1) {
      ctx.exit_code = UsageError("bench: -r must be at least 1");
      return;
    }
    auto pps = ParseCountList("-p", pp, 0);
    auto tgs = ParseCountList("-n", tg, 0);
    auto ths = thread_list.empty() ? Result<std::vector<int64_t>>(std::vector<int64_t>{0})
                                   : ParseCountList("-t", thread_list, 0);
    for (const auto* list : {&pps, &tgs, &ths}) {
      if (!list->ok()) {
        ctx.exit_code = UsageError("bench: " + list->status().message());
        return;
      }
    }
    mf.threads = static_cast<int>((*ths)[0]);
    auto loaded = LoadForRun(mf, /*need_tokenizer=*/false);
    if (!loaded.ok()) {
      ctx.exit_code = Fail(loaded.status().ToString());
      return;
    }
    const Model& m = *loaded->model;
    std::vector<std::pair<std::string, int64_t>> tests;
    for (int64_t n : *pps)
      if (n > 0) tests.emplace_back("pp", n);
    for (int64_t n : *tgs)
      if (n > 0) tests.emplace_back("tg", n);
    int64_t need = 16;
    for (const auto& t : tests) need = std::max(need, t.second);
    // Bytes a decode step streams: every weight but a table only read a row at a time, and of the
    // experts those a token picks.
    const uint64_t step_bytes = DecodeStepBytes(m);
    const std::string type = std::string(GgmlTypeName(MainWeightType(m)));
    nlohmann::json docs = nlohmann::json::array();
    for (size_t ti = 0; ti < ths->size(); ++ti) {
      if (ti > 0) {  // a fresh backend with this many threads; the loaded weights are reused
        loaded->runtime.reset();
        auto be = CreateBackend({.name = mf.backend, .threads = static_cast<int>((*ths)[ti])});
        if (!be.ok()) {
          ctx.exit_code = Fail(be.status().ToString());
          return;
        }
        loaded->backend = std::move(be).value();
      }
      auto session = CreateSession(mf, *loaded, need);
      if (!session.ok()) {
        ctx.exit_code = Fail(session.status().ToString());
        return;
      }
      // The decode roofline: what this backend's memory streams now (measured per backend instance,
      // so per thread count on the CPU), against which each tgN's weight bytes per second are set.
      double bw_gbs = 0;
      std::string bw_note;
      if (!no_roofline &&
          std::any_of(tests.begin(), tests.end(), [](const auto& t) { return t.first == "tg"; })) {
        auto bw = loaded->backend->MeasureBandwidth(0.5);
        if (bw.ok()) {
          bw_gbs = *bw;
        } else {
          bw_note = bw.status().ToString();
        }
      }
      nlohmann::json results = nlohmann::json::array();
      for (const auto& [kind, n] : tests) {
        std::vector<double> samples;
        for (int r = 0; r <= reps; ++r) {  // r == 0 warms up
          auto tps = TimeOne(**session, kind, n, m.config.vocab_size);
          if (!tps.ok()) {
            ctx.exit_code = Fail(tps.status().ToString());
            return;
          }
          if (r > 0) samples.push_back(*tps);
        }
        Stats st = Summarize(samples);
        results.push_back(
            {{"test", kind + std::to_string(n)},
             {"tokens_per_second", st.mean},
             {"stddev", st.stddev},
             {"samples", st.samples},
             {"weight_gb_per_second", kind == "tg" ? st.mean * static_cast<double>(step_bytes) / 1e9 : 0},
             {"fraction_of_bandwidth",
              kind == "tg" && bw_gbs > 0 ? st.mean * static_cast<double>(step_bytes) / 1e9 / bw_gbs : 0}});
      }
      session->reset();
      docs.push_back({{"model", mf.model},
                      {"arch", m.config.arch},
                      {"weights", type},
                      {"weight_bytes", m.weight_bytes},
                      {"decode_step_bytes", step_bytes},
                      {"backend", loaded->backend->name()},
                      {"threads", loaded->backend->threads()},
                      {"isa", std::string(cpu::IsaName(cpu::Kernels().isa))},
                      {"cpu", GetCpuFeatures().model_name},
                      {"load_seconds", m.load_seconds},
                      {"peak_rss_mib", PeakRssMiB()},
                      {"bandwidth_gb_per_second", bw_gbs},
                      {"bandwidth_kind", loaded->backend->name() == "cpu" ? "streaming read" : "device copy"},
                      {"results", results}});
      if (!bw_note.empty()) docs.back()["bandwidth_error"] = bw_note;
    }
    if (as_json) {  // one object for one thread count (as before lists existed), else an array
      fmt::print("{}\n", docs.size() == 1 ? docs[0].dump(2) : docs.dump(2));
      return;
    }
    // Decode rows also give the weights' read rate and its share of the measured bandwidth.
    fmt::print(
        "| model | weights | size | threads | backend | test | t/s | weights GB/s | of bandwidth |\n"
        "|---|---|---:|---:|---|---|---:|---:|---:|\n");
    for (const auto& d : docs) {
      // The CPU backend's instruction set, or the other backend's name (its thread count is the host's).
      const auto backend = d["backend"].get<std::string>();
      const std::string where = backend == "cpu" ? "cpu " + d["isa"].get<std::string>() : backend;
      for (const auto& r : d["results"]) {
        const double gbs = r["weight_gb_per_second"].get<double>(),
                     frac = r["fraction_of_bandwidth"].get<double>();
        fmt::print("| {} | {} | {:.2f} GiB | {} | {} | {} | {:.2f} ± {:.2f} | {} | {} |\n", m.config.arch,
                   type, static_cast<double>(m.weight_bytes) / (1ull << 30), d["threads"].get<int>(), where,
                   r["test"].get<std::string>(), r["tokens_per_second"].get<double>(),
                   r["stddev"].get<double>(), gbs > 0 ? fmt::format("{:.1f}", gbs) : "",
                   frac > 0 ? fmt::format("{:.0f}%", 100 * frac) : "");
      }
    }
    fmt::print("\n");
    for (const auto& d : docs) {
      if (d["bandwidth_gb_per_second"].get<double>() > 0) {
        fmt::print("bandwidth ({} threads): {:.1f} GB/s ({}; the decode step reads {:.2f} GB)\n",
                   d["threads"].get<int>(), d["bandwidth_gb_per_second"].get<double>(),
                   d["bandwidth_kind"].get<std::string>(), static_cast<double>(step_bytes) / 1e9);
      } else if (d.contains("bandwidth_error")) {
        fmt::print("bandwidth: not measured ({})\n", d["bandwidth_error"].get<std::string>());
      }
    }
    fmt::print("load {:.2f} s, peak RSS {:.0f} MiB\n", m.load_seconds, PeakRssMiB());
  });
}

}  // namespace fak::cli
