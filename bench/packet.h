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

}  // namespace fak::bench
