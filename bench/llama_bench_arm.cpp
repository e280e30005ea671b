// llama.cpp's llama-bench, for throughput only: one run for prefill (-p CTX -n 0) and one for decode
// at the same depth as the other arms (-p 0 -n GEN -d CTX), each with -r N repetitions after
// llama-bench's own warm-up run. llama-bench feeds its own tokens, so it exposes no output tokens:
// TTFT, ITL and quality are marked not measured.
#include <nlohmann/json.hpp>

#include "bench/arm.h"
#include "bench/subprocess.h"
#include "core/timer.h"

namespace fak::bench {
namespace {

// The samples of the test with these n_prompt / n_gen in llama-bench's JSON array.
Result<std::vector<double>> SamplesNs(const nlohmann::json& doc, int64_t n_prompt, int64_t n_gen) {
  if (!doc.is_array()) return Corrupt("llama-bench output is not a JSON array");
  for (const auto& t : doc) {
    if (!t.is_object() || t.value("n_prompt", int64_t{-1}) != n_prompt ||
        t.value("n_gen", int64_t{-1}) != n_gen) {
      continue;
    }
    if (!t.contains("samples_ns") || !t["samples_ns"].is_array()) {
      return Corrupt("llama-bench test p{} n{} has no samples_ns array", n_prompt, n_gen);
    }
    std::vector<double> v;
    for (const auto& x : t["samples_ns"]) {
      if (!x.is_number() || x.get<double>() <= 0)
        return Corrupt("llama-bench samples_ns holds a non-positive value");
      v.push_back(x.get<double>());
    }
    return v;
  }
  return Corrupt("llama-bench output has no test with n_prompt {} and n_gen {}", n_prompt, n_gen);
}

class LlamaBenchArm : public Arm {
 public:
  LlamaBenchArm(std::string spec, std::string path) : Arm(std::move(spec)), path_(std::move(path)) {}

  ArmRun Run(const Workload& w) override {
    ArmRun r = NewRun("llama.cpp", "llama.cpp");
    r.notes = {
        {"ttft", "not measured: llama-bench times whole prefill and decode runs"},
        {"itl", "not measured"},
        {"prefill_tps", "ctx / each repetition of llama-bench -p CTX -n 0"},
        {"decode_tps", "gen / each repetition of llama-bench -p 0 -n GEN -d CTX (decode after CTX tokens)"},
        {"decomposition",
         "no request boundary: repetition i pairs prefill run i with decode run i; queue, setup, "
         "verification, recovery and other are 0"},
        {"tokens", "llama-bench uses its own token ids; no output tokens, no quality evidence"},
        {"warmup", "llama-bench's own warm-up run, excluded by llama-bench"}};
    const std::string n = std::to_string(w.prompts.size()), t = std::to_string(w.threads);
    const std::vector<std::vector<std::string>> runs = {
        {path_, "-m", w.model_path, "-p", std::to_string(w.ctx), "-n", "0", "-r", n, "-o", "json", "-t", t},
        {path_, "-m", w.model_path, "-p", "0", "-n", std::to_string(w.gen), "-d", std::to_string(w.ctx), "-r",
         n, "-o", "json", "-t", t}};
    Timer budget;
    std::vector<std::vector<double>> samples;
    for (size_t k = 0; k < runs.size(); ++k) {
      r.commands.push_back(RedactModelPath(JoinCommand(runs[k]), w.model_path));
      const double left = w.timeout_seconds - budget.Seconds();
      auto pr = RunProcess(runs[k], std::max(1.0, left));
      if (!pr.ok()) {
        r.Fail(pr.status().ToString());
        return r;
      }
      if (pr->timed_out || pr->exit_code != 0) {
        r.Fail(fmt::format("llama-bench {}", pr->exit_description), pr->err_tail);
        return r;
      }
      auto doc = nlohmann::json::parse(pr->out, nullptr, /*allow_exceptions=*/false);
      if (doc.is_discarded()) {
        r.Fail(fmt::format("llama-bench printed no valid JSON (first bytes: {:?})", pr->out.substr(0, 120)),
               pr->err_tail);
        return r;
      }
      auto s = k == 0 ? SamplesNs(doc, w.ctx, 0) : SamplesNs(doc, 0, w.gen);
      if (!s.ok()) {
        r.Fail(s.status().ToString(), pr->err_tail);
        return r;
      }
      if (s->size() != w.prompts.size()) {
        r.Fail(fmt::format("llama-bench returned {} samples, expected {}", s->size(), w.prompts.size()),
               pr->err_tail);
        return r;
      }
      if (doc[0].is_object() && r.version.empty()) {
        r.version = fmt::format("build {} ({})", doc[0].value("build_number", int64_t{0}),
                                doc[0].value("build_commit", std::string("unknown")));
        r.notes["llama_bench_cpu_info"] = doc[0].value("cpu_info", "");
        r.notes["llama_bench_model_type"] = doc[0].value("model_type", "");
      }
      samples.push_back(std::move(*s));
    }
    for (size_t i = 0; i < w.prompts.size(); ++i) {
      const double pp_ms = samples[0][i] * 1e-6, tg_ms = samples[1][i] * 1e-6;
      r.prefill_ms_samples.push_back(pp_ms);
      r.decode_ms_samples.push_back(tg_ms);
      r.prefill_tps_samples.push_back(static_cast<double>(w.ctx) / (pp_ms * 1e-3));
      r.decode_tps_samples.push_back(static_cast<double>(w.gen) / (tg_ms * 1e-3));
    }
    return r;
  }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<Arm> MakeLlamaBenchArm(const std::string& spec, const std::string& path) {
  return std::make_unique<LlamaBenchArm>(spec, path);
}

}  // namespace fak::bench
