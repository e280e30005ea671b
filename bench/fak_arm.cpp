// fak in process. Per request: setup (reset the session), prefill of the ctx prompt tokens, then
// greedy decode; the first token's logits are kept as quality evidence. Times are taken with the
// monotonic clock at each boundary so the parts of a request add up to its total exactly.
#include <algorithm>
#include <cstring>

#include "bench/arm.h"
#include "core/timer.h"    // NowNanos
#include "engine/model.h"  // LoadModel
#include "engine/session.h"

namespace fak::bench {
namespace {

int32_t Argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

class FakArm : public Arm {
 public:
  FakArm(std::string spec, std::string device) : Arm(std::move(spec)), device_(std::move(device)) {}

  ArmRun Run(const Workload& w) override {
    ArmRun r = NewRun(ArmFileName(spec()), "fak");
    r.measures_latency = r.exposes_tokens = r.exposes_logits = true;
    r.commands.push_back(
        fmt::format("in-process: LoadModel({}), Session with {} threads, greedy, {} prompt + {} "
                    "generated tokens per request",
                    RedactModelPath(w.model_path, w.model_path), w.threads, w.ctx, w.gen));
    r.notes = {{"ttft", "request start to the first greedy token (setup + prefill + argmax)"},
               {"itl", "time between consecutive greedy tokens, excluding the copy of quality evidence"},
               {"prefill_tps", "ctx tokens / Session::Prefill time"},
               {"decode_tps", "tokens after the first / sum of inter-token latencies"},
               {"decomposition",
                "queue 0 (in process, one request at a time); setup: session reset; prefill: Prefill call; "
                "decode: Step calls; verification: copying first-token logits; recovery 0; other: argmax and "
                "bookkeeping"}};
    if (device_ == "cuda") {
      r.Fail(
          "fak:cuda: the engine in this build has no CUDA forward pass; run fak:cpu or a CUDA-enabled build");
      return r;
    }
    auto model = LoadModel(w.model_path);
    if (!model.ok()) {
      r.Fail("loading the model: " + model.status().ToString());
      return r;
    }
    const Model& m = **model;
    r.notes["load_seconds"] = m.load_seconds;
    r.notes["weights"] = std::string(GgmlTypeName(MainWeightType(m)));
    auto runtime =
        Runtime::Create(m, RuntimeOptions{.max_context = w.ctx + w.gen, .backend = {.threads = w.threads}});
    if (!runtime.ok()) {
      r.Fail("creating the runtime: " + runtime.status().ToString());
      return r;
    }
    auto session = Session::Create(**runtime);
    if (!session.ok()) {
      r.Fail("creating a session: " + session.status().ToString());
      return r;
    }
    if ((*session)->max_context() < w.ctx + w.gen - 1) {
      r.Fail(fmt::format("the model's context ({}) is shorter than ctx + gen - 1 = {}",
                         (*session)->max_context(), w.ctx + w.gen - 1));
      return r;
    }
    Status s = OneRequest(**session, w.warmup, w, -1, nullptr);
    for (size_t i = 0; s.ok() && i < w.prompts.size(); ++i) {
      RequestSample sample;
      s = OneRequest(**session, w.prompts[i], w, static_cast<int64_t>(i), &sample);
      if (s.ok()) r.requests.push_back(std::move(sample));
    }
    if (!s.ok()) r.Fail(s.ToString());
    return r;
  }

 private:
  Status OneRequest(Session& session, const std::vector<int32_t>& prompt, const Workload& w, int64_t index,
                    RequestSample* out) {
    RequestSample rs;
    rs.prompt_index = index;
    std::vector<float> logits(static_cast<size_t>(session.vocab_size()));
    const int64_t t0 = NowNanos();
    session.Truncate(0);
    const int64_t t1 = NowNanos();
    FAK_RETURN_IF_ERROR(session.Prefill(prompt, logits.data()));
    const int64_t t2 = NowNanos();
    int32_t tok = Argmax(logits);
    const int64_t t3 = NowNanos();
    rs.tokens.push_back(tok);
    rs.first_logits = logits;
    const int64_t t4 = NowNanos();
    int64_t decode_ns = 0, itl_sum_ns = 0, prev = t4;
    for (int64_t i = 1; i < w.gen; ++i) {
      const int64_t a = NowNanos();
      FAK_RETURN_IF_ERROR(session.Step(tok, logits.data()));
      decode_ns += NowNanos() - a;
      tok = Argmax(logits);
      const int64_t now = NowNanos();
      rs.itl_ms.push_back(Ms(now - prev));
      itl_sum_ns += now - prev;
      prev = now;
      rs.tokens.push_back(tok);
    }
    const int64_t t_end = NowNanos();
    rs.ttft_ms = Ms(t3 - t0);
    rs.setup_ms = Ms(t1 - t0);
    rs.prefill_ms = Ms(t2 - t1);
    rs.decode_ms = Ms(decode_ns);
    rs.verification_ms = Ms(t4 - t3);
    rs.total_ms = Ms(t_end - t0);
    rs.other_ms = Ms((t_end - t0) - (t1 - t0) - (t2 - t1) - decode_ns - (t4 - t3));
    rs.prefill_tps = static_cast<double>(prompt.size()) / ((t2 - t1) * 1e-9);
    rs.decode_tps = itl_sum_ns > 0 ? static_cast<double>(w.gen - 1) / (itl_sum_ns * 1e-9) : 0;
    if (out != nullptr) *out = std::move(rs);
    return Status::Ok();
  }

  std::string device_;
};

}  // namespace

std::unique_ptr<Arm> MakeFakArm(const std::string& spec, const std::string& device) {
  return std::make_unique<FakArm>(spec, device);
}

}  // namespace fak::bench
