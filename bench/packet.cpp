#include "bench/packet.h"

#include "bench/stats.h"

namespace fak::bench {
namespace {

nlohmann::json OrNull(const std::vector<double>& v) {
  return v.empty() ? nlohmann::json(nullptr) : SummaryToJson(Summarize(v));
}

}  // namespace

nlohmann::json RawDoc(const ArmRun& arm, const Workload& w) {
  nlohmann::json requests = nlohmann::json::array();
  for (const auto& r : arm.requests) {
    nlohmann::json d = {{"queue", r.queue_ms},
                        {"setup", r.setup_ms},
                        {"prefill", r.prefill_ms},
                        {"decode", r.decode_ms},
                        {"verification", r.verification_ms},
                        {"recovery", r.recovery_ms},
                        {"other", r.other_ms},
                        {"total", r.total_ms}};
    requests.push_back(
        {{"prompt_index", r.prompt_index},
         {"ttft_ms", arm.measures_latency ? nlohmann::json(r.ttft_ms) : nlohmann::json(nullptr)},
         {"itl_ms", r.itl_ms},
         {"prefill_tps", r.prefill_tps},
         {"decode_tps", r.decode_tps},
         {"tokens_generated", r.tokens.size()},
         {"tokens", r.tokens},
         {"decomposition_ms", d}});
  }
  nlohmann::json reps = nlohmann::json::array();
  for (size_t i = 0; i < arm.prefill_tps_samples.size(); ++i) {
    reps.push_back({{"prefill_ms", arm.prefill_ms_samples[i]},
                    {"decode_ms", arm.decode_ms_samples[i]},
                    {"prefill_tps", arm.prefill_tps_samples[i]},
                    {"decode_tps", arm.decode_tps_samples[i]}});
  }
  return {
      {"schema", kRawSchema},
      {"arm", arm.name},
      {"spec", arm.spec},
      {"engine", arm.engine},
      {"version", arm.version},
      {"status", arm.status},
      {"reason", arm.reason},
      {"stderr_tail", arm.stderr_tail},
      {"measures",
       {{"latency", arm.measures_latency}, {"tokens", arm.exposes_tokens}, {"logits", arm.exposes_logits}}},
      {"workload", {{"prompts", w.prompts.size()}, {"ctx", w.ctx}, {"gen", w.gen}, {"warmup_runs", 1}}},
      {"commands", arm.commands},
      {"notes", arm.notes},
      {"requests", requests},
      {"repetitions", reps}};
}

nlohmann::json MetricsFromRaw(const nlohmann::json& raw) {
  std::vector<double> ttft, itl, pp, tg;
  const bool latency = raw["measures"].value("latency", false);
  for (const auto& r : raw["requests"]) {
    if (latency) {
      ttft.push_back(r["ttft_ms"].get<double>());
      for (const auto& x : r["itl_ms"]) itl.push_back(x.get<double>());
    }
    pp.push_back(r["prefill_tps"].get<double>());
    tg.push_back(r["decode_tps"].get<double>());
  }
  for (const auto& r : raw["repetitions"]) {
    pp.push_back(r["prefill_tps"].get<double>());
    tg.push_back(r["decode_tps"].get<double>());
  }
  return {{"ttft_ms", OrNull(ttft)},
          {"itl_ms", OrNull(itl)},
          {"prefill_tps", OrNull(pp)},
          {"decode_tps", OrNull(tg)}};
}

nlohmann::json DecompositionFromRaw(const nlohmann::json& raw) {
  nlohmann::json parts = nlohmann::json::object();
  for (const auto& p : DecompositionParts()) parts[p] = 0.0;
  double total = 0;
  int64_t count = 0;
  std::string source;
  if (!raw["requests"].empty()) {
    source = "requests";
    for (const auto& r : raw["requests"]) {
      const auto& d = r["decomposition_ms"];
      for (const auto& p : DecompositionParts()) parts[p] = parts[p].get<double>() + d[p].get<double>();
      total += d["total"].get<double>();
      ++count;
    }
  } else if (!raw["repetitions"].empty()) {
    source = "repetitions (no request boundary: prefill run + decode run)";
    for (const auto& r : raw["repetitions"]) {
      parts["prefill"] = parts["prefill"].get<double>() + r["prefill_ms"].get<double>();
      parts["decode"] = parts["decode"].get<double>() + r["decode_ms"].get<double>();
      total += r["prefill_ms"].get<double>() + r["decode_ms"].get<double>();
      ++count;
    }
  } else {
    return nullptr;
  }
  nlohmann::json mean = nlohmann::json::object();
  for (const auto& p : DecompositionParts()) mean[p] = parts[p].get<double>() / static_cast<double>(count);
  mean["total"] = total / static_cast<double>(count);
  return {{"source", source}, {"count", count}, {"total_ms", total}, {"parts_ms", parts}, {"mean_ms", mean}};
}

nlohmann::json Ratios(const nlohmann::json& arms, const std::string& reference) {
  nlohmann::json out = nlohmann::json::array();
  const nlohmann::json* ref = nullptr;
  for (const auto& a : arms) {
    if (a["name"] == reference) ref = &a;
  }
  if (ref == nullptr || (*ref)["status"] != "ok") return out;
  for (const auto& a : arms) {
    if (a["name"] == reference || a["status"] != "ok") continue;
    for (const auto& m : kMetrics) {
      const auto& x = a["metrics"][m.name];
      const auto& y = (*ref)["metrics"][m.name];
      if (x.is_null() || y.is_null() || y["p50"].get<double>() == 0 || y["p95"].get<double>() == 0) continue;
      const double r50 = x["p50"].get<double>() / y["p50"].get<double>();
      const double r95 = x["p95"].get<double>() / y["p95"].get<double>();
      out.push_back({{"arm", a["name"]},
                     {"reference", reference},
                     {"metric", m.name},
                     {"p50_ratio", r50},
                     {"p95_ratio", r95},
                     {"better", m.higher_is_better ? "higher" : "lower"}});
    }
  }
  return out;
}

}  // namespace fak::bench
