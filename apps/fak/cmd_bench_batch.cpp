// fak bench batch: B concurrent sequences through the batched runtime, the shapes of llama.cpp's
// llama-batched-bench. Each sequence gets its own prompt of p tokens; the prompts are prefilled
// together in ragged batches of up to --ubatch rows, then every step decodes one token of every
// sequence in one forward pass (greedy), n steps. Rates are aggregates over all sequences:
// prefill_tok_s = B*p / prefill time, decode_tok_s = B*n / decode time; the inter-token latency of a
// sequence is the time of one decode step (forward passes only; the greedy choice of the next
// tokens is left out, as llama-batched-bench does not sample).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/fak/commands.h"
#include "apps/fak/flag_lists.h"
#include "apps/fak/model_flags.h"
#include "core/timer.h"
#include "engine/runtime.h"
#include "engine/sampler.h"

namespace fak::cli {
namespace {

// Prompt tokens of sequence `seq`: deterministic, distinct per sequence.
std::vector<int32_t> PromptTokens(int64_t seq, int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(seq + 1);
  for (auto& id : t) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    id = static_cast<int32_t>(x % static_cast<uint64_t>(std::min<int64_t>(vocab, 32000)));
  }
  return t;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

struct BatchRun {
  double prefill_s = 0, decode_s = 0;
  std::vector<double> step_ms;
};

Result<BatchRun> RunBatch(Runtime& rt, int64_t B, int64_t p, int64_t n, int64_t ubatch) {
  const int64_t vocab = rt.vocab_size();
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t b = 0; b < B; ++b) {
    FAK_ASSIGN_OR_RETURN(std::unique_ptr<Sequence> seq, rt.NewSequence());
    seqs.push_back(std::move(seq));
    prompts.push_back(PromptTokens(b, p, vocab));
  }
  std::vector<float> logits(static_cast<size_t>(B * vocab));
  // As fak serve does: the logits land in registered memory, without a pass through the staging area.
  struct Pin {
    Backend& be;
    void* p;
    bool on;
    ~Pin() {
      if (on) be.UnpinHost(p);
    }
  } pin{rt.backend(), logits.data(), rt.backend().PinHost(logits.data(), logits.size() * sizeof(float))};
  std::vector<int32_t> next(static_cast<size_t>(B));
  BatchRun r;
  // Prefill: the prompts' remaining tokens packed into ragged batches of up to `ubatch` rows.
  Timer t;
  std::vector<int64_t> done(static_cast<size_t>(B), 0);
  for (int64_t b0 = 0; b0 < B;) {
    std::vector<SeqWork> work;
    int64_t rows = 0;
    for (int64_t b = b0; b < B && rows < ubatch; ++b) {
      const size_t bi = static_cast<size_t>(b);
      const int64_t take = std::min(p - done[bi], ubatch - rows);
      const bool last = done[bi] + take == p;
      work.push_back({seqs[bi].get(),
                      std::span<const int32_t>(prompts[bi])
                          .subspan(static_cast<size_t>(done[bi]), static_cast<size_t>(take)),
                      false, last ? &logits[bi * static_cast<size_t>(vocab)] : nullptr});
      rows += take;
    }
    FAK_RETURN_IF_ERROR(rt.Forward(work));
    for (const SeqWork& w : work) {
      const size_t bi = static_cast<size_t>(&w - work.data()) + static_cast<size_t>(b0);
      done[bi] += static_cast<int64_t>(w.tokens.size());
    }
    while (b0 < B && done[static_cast<size_t>(b0)] == p) ++b0;
  }
  r.prefill_s = t.Seconds();
  // Decode: one row per sequence per step, greedy. Only the forward passes are timed (like
  // llama-batched-bench, which does not sample): choosing tokens is not the engine's work here.
  std::vector<SeqWork> work(static_cast<size_t>(B));
  for (int64_t step = 0; step < n; ++step) {
    for (int64_t b = 0; b < B; ++b) {
      const size_t bi = static_cast<size_t>(b);
      next[bi] = Argmax(
          std::span<const float>(&logits[bi * static_cast<size_t>(vocab)], static_cast<size_t>(vocab)));
      work[bi] = {seqs[bi].get(), std::span<const int32_t>(&next[bi], 1), false,
                  &logits[bi * static_cast<size_t>(vocab)]};
    }
    Timer st;
    FAK_RETURN_IF_ERROR(rt.Forward(work));
    r.step_ms.push_back(st.Seconds() * 1e3);
    r.decode_s += st.Seconds();
  }
  return r;
}

}  // namespace

void RegisterBenchBatch(CLI::App* bench_cmd, Context& ctx) {
  auto* cmd = bench_cmd->add_subcommand("batch",
                                        "B concurrent sequences through the batched runtime "
                                        "(llama-batched-bench shapes): aggregate prefill and decode tok/s");
  static ModelFlags mf;
  static std::string b_list = "1,2,4,8,16,32";
  static int64_t p = 128, n = 64, ubatch = 512;
  static int reps = 1;
  static bool as_json = false;
  mf.Add(cmd);
  cmd->add_option("-p,--n-prompt", p, "Prompt tokens per sequence");
  cmd->add_option("-n,--n-gen", n, "Tokens generated per sequence");
  cmd->add_option("-b,--batch", b_list, "Concurrent sequences, comma-separated");
  cmd->add_option("--ubatch", ubatch, "Rows per forward pass while prefilling");
  cmd->add_option("-r,--repetitions", reps, "Timed repetitions per batch size (after one warm-up)");
  cmd->add_flag("--json", as_json, "Print JSON");
  cmd->callback([&ctx]() {
    auto bs = ParseCountList("-b", b_list, 1);
    if (!bs.ok()) {
      ctx.exit_code = UsageError(bs.status().ToString());
      return;
    }
    if (p < 1 || n < 1 || ubatch < 1 || reps < 1) {
      ctx.exit_code = UsageError("bench batch: -p, -n, --ubatch and -r must be at least 1");
      return;
    }
    auto loaded = LoadForRun(mf, /*need_tokenizer=*/false);
    if (!loaded.ok()) {
      ctx.exit_code = Fail(loaded.status().ToString());
      return;
    }
    const int64_t max_b = *std::max_element(bs->begin(), bs->end());
    Status s = CreateRuntime(mf, *loaded, p + n, max_b);
    if (!s.ok()) {
      ctx.exit_code = Fail(s.ToString());
      return;
    }
    Runtime& rt = *loaded->runtime;
    if (rt.max_context() < p + n) {
      ctx.exit_code = Fail(fmt::format("bench batch: the model's context ({}) is shorter than -p + -n = {}",
                                       rt.max_context(), p + n));
      return;
    }
    const Model& m = *loaded->model;
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t B : *bs) {
      std::vector<double> pre, dec, steps;
      for (int r = 0; r <= reps; ++r) {  // r == 0 warms up
        auto run = RunBatch(rt, B, p, n, ubatch);
        if (!run.ok()) {
          ctx.exit_code = Fail(run.status().ToString());
          return;
        }
        if (r == 0) continue;
        pre.push_back(static_cast<double>(B * p) / run->prefill_s);
        dec.push_back(static_cast<double>(B * n) / run->decode_s);
        steps.insert(steps.end(), run->step_ms.begin(), run->step_ms.end());
      }
      auto mean = [](const std::vector<double>& v) {
        double x = 0;
        for (double y : v) x += y;
        return x / static_cast<double>(v.size());
      };
      rows.push_back({{"batch", B},
                      {"n_prompt", p},
                      {"n_gen", n},
                      {"prefill_tok_s", mean(pre)},
                      {"decode_tok_s", mean(dec)},
                      {"itl_p50_ms", Percentile(steps, 0.5)},
                      {"itl_p95_ms", Percentile(steps, 0.95)},
                      {"prefill_samples", pre},
                      {"decode_samples", dec}});
    }
    nlohmann::json doc = {{"model", mf.model},
                          {"arch", m.config.arch},
                          {"weights", std::string(GgmlTypeName(MainWeightType(m)))},
                          {"backend", loaded->backend->name()},
                          {"threads", loaded->backend->threads()},
                          {"ubatch", ubatch},
                          {"repetitions", reps},
                          {"results", rows}};
    if (as_json) {
      fmt::print("{}\n", doc.dump(2));
      return;
    }
    fmt::print("| B | p | n | prefill tok/s | decode tok/s (aggregate) | ITL p50 ms | ITL p95 ms |\n");
    fmt::print("|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const auto& r : rows) {
      fmt::print("| {} | {} | {} | {:.1f} | {:.1f} | {:.2f} | {:.2f} |\n", r["batch"].get<int64_t>(), p, n,
                 r["prefill_tok_s"].get<double>(), r["decode_tok_s"].get<double>(),
                 r["itl_p50_ms"].get<double>(), r["itl_p95_ms"].get<double>());
    }
  });
}

}  // namespace fak::cli
