#include "bench/packet.h"

#include <map>

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
    if (r.recoveries > 0 || !r.notes.empty()) {  // a dropped stream resumed: how often, and the errors
      requests.back()["recoveries"] = r.recoveries;
      requests.back()["notes"] = r.notes;
    }
    if (r.agent >= 0) {
      requests.back()["fleet"] = {{"round", r.round},
                                  {"agent", r.agent},
                                  {"start_ms", r.start_ms},
                                  {"prompt_tokens", r.prompt_tokens},
                                  {"cached_tokens", r.cached_tokens}};
    }
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

nlohmann::json FleetFromRaw(const nlohmann::json& raw) {
  struct Round {
    bool has_first = false;
    double first_ttft = 0;
    std::vector<double> rest_ttft;
    double first_token = 1e300, last_token = -1e300, start = 1e300, end = -1e300;
    int64_t rest_tokens = 0;
  };
  std::map<int64_t, Round> rounds;
  int64_t agents = 0, min_cached = -1;
  for (const auto& r : raw["requests"]) {
    if (!r.contains("fleet")) continue;
    const auto& f = r["fleet"];
    Round& rd = rounds[f["round"].get<int64_t>()];
    const int64_t agent = f["agent"].get<int64_t>();
    agents = std::max(agents, agent + 1);
    const double start = f["start_ms"].get<double>(), ttft = r["ttft_ms"].get<double>();
    double last = start + ttft;
    for (const auto& x : r["itl_ms"]) last += x.get<double>();
    rd.start = std::min(rd.start, start);
    rd.end = std::max(rd.end, start + r["decomposition_ms"]["total"].get<double>());
    if (agent == 0) {
      rd.has_first = true;
      rd.first_ttft = ttft;
      continue;
    }
    rd.rest_ttft.push_back(ttft);
    rd.first_token = std::min(rd.first_token, start + ttft);
    rd.last_token = std::max(rd.last_token, last);
    rd.rest_tokens += r["tokens_generated"].get<int64_t>();
    const int64_t cached = f["cached_tokens"].get<int64_t>();
    min_cached = min_cached < 0 ? cached : std::min(min_cached, cached);
  }
  if (rounds.empty()) return nullptr;
  std::vector<double> first, rest, decode, wall;
  for (const auto& [index, rd] : rounds) {
    if (rd.has_first) first.push_back(rd.first_ttft);
    rest.insert(rest.end(), rd.rest_ttft.begin(), rd.rest_ttft.end());
    if (rd.last_token > rd.first_token) {
      decode.push_back(static_cast<double>(rd.rest_tokens) / ((rd.last_token - rd.first_token) * 1e-3));
    }
    wall.push_back(rd.end - rd.start);
  }
  nlohmann::json out = {{"rounds", rounds.size()},
                        {"agents", agents},
                        {"first_ttft_ms", OrNull(first)},
                        {"rest_ttft_ms", OrNull(rest)},
                        {"aggregate_decode_tps", OrNull(decode)},
                        {"wall_ms", OrNull(wall)},
                        {"rest_cached_tokens_min", min_cached}};
  const auto& f = out["first_ttft_ms"];
  const auto& r = out["rest_ttft_ms"];
  if (!f.is_null() && !r.is_null() && r["p50"].get<double>() > 0 && r["p95"].get<double>() > 0) {
    out["first_over_rest_p50"] = f["p50"].get<double>() / r["p50"].get<double>();
    out["first_over_rest_p95"] = f["p50"].get<double>() / r["p95"].get<double>();
  } else {
    out["first_over_rest_p50"] = out["first_over_rest_p95"] = nullptr;
  }
  return out;
}

nlohmann::json FleetRatios(const nlohmann::json& fleet_arms, const std::string& reference) {
  nlohmann::json out = nlohmann::json::array();
  if (!fleet_arms.contains(reference) || fleet_arms[reference].is_null()) return out;
  const auto& ref = fleet_arms[reference];
  for (const auto& [name, a] : fleet_arms.items()) {
    if (name == reference || a.is_null()) continue;
    for (const auto& m : kFleetMetrics) {
      const auto& x = a[m.name];
      const auto& y = ref[m.name];
      if (x.is_null() || y.is_null() || y["p50"].get<double>() == 0 || y["p95"].get<double>() == 0) continue;
      out.push_back({{"arm", name},
                     {"reference", reference},
                     {"metric", m.name},
                     {"p50_ratio", x["p50"].get<double>() / y["p50"].get<double>()},
                     {"p95_ratio", x["p95"].get<double>() / y["p95"].get<double>()},
                     {"better", m.higher_is_better ? "higher" : "lower"}});
    }
  }
  return out;
}

}  // namespace fak::bench
