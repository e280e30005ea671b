// The JSON documents of a run folder and the derivations between them. The packet's numbers are
// computed from the raw files by these same functions, and the validator recomputes them, so a
// packet whose numbers do not follow from its samples is caught.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/arm.h"

namespace fak::bench {

inline constexpr const char* kPacketSchema = "fak.bench.comparison.v1";
inline constexpr const char* kRawSchema = "fak.bench.raw.v1";
inline constexpr const char* kManifestSchema = "fak.bench.manifest.v1";
inline constexpr const char* kValidationSchema = "fak.bench.comparison.validation.v1";

// The request-boundary parts, in order; they add up to total_ms.
inline const std::vector<std::string>& DecompositionParts() {
  static const std::vector<std::string> kParts = {"queue",        "setup",    "prefill", "decode",
                                                  "verification", "recovery", "other"};
  return kParts;
}

// The metrics of a packet: name and whether higher is better.
struct MetricInfo {
  const char* name;
  bool higher_is_better;
  const char* unit;
};
inline constexpr MetricInfo kMetrics[] = {{"ttft_ms", false, "ms"},
                                          {"itl_ms", false, "ms"},
                                          {"prefill_tps", true, "tok/s"},
                                          {"decode_tps", true, "tok/s"}};

// <arm>-raw.json: every sample of one arm.
nlohmann::json RawDoc(const ArmRun& arm, const Workload& w);

// {"ttft_ms": summary or null, "itl_ms": ..., "prefill_tps": ..., "decode_tps": ...} from a raw doc.
nlohmann::json MetricsFromRaw(const nlohmann::json& raw);
// {"source", "count", "total_ms", "parts_ms": {...}, "mean_ms": {...}} from a raw doc, or null when it
// holds no samples.
nlohmann::json DecompositionFromRaw(const nlohmann::json& raw);
// One entry per (arm, metric) where the arm and the reference both measured the metric.
nlohmann::json Ratios(const nlohmann::json& arms, const std::string& reference);

// Fleet runs: the fleet metrics, whether higher is better.
inline constexpr MetricInfo kFleetMetrics[] = {{"first_ttft_ms", false, "ms"},
                                               {"rest_ttft_ms", false, "ms"},
                                               {"aggregate_decode_tps", true, "tok/s"},
                                               {"wall_ms", false, "ms"}};
// A fleet arm's summary from its raw doc (requests carrying "fleet" fields): per round, the first
// agent's TTFT, the other agents' TTFTs, their aggregate decode rate (every token they generated over
// the time from the first of their first tokens to the last of their last tokens) and the round's
// wall time (first request sent to last response finished); then first_over_rest_p50/p95 (the first
// agent's TTFT p50 over the rest's p50 / p95) and the fewest cached prompt tokens any later agent got.
// Null when the raw doc holds no fleet requests.
nlohmann::json FleetFromRaw(const nlohmann::json& raw);
// One entry per (arm, fleet metric) against the reference, as Ratios does for the packet metrics.
nlohmann::json FleetRatios(const nlohmann::json& fleet_arms, const std::string& reference);

}  // namespace fak::bench
