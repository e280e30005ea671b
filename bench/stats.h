// Sample summaries for benchmark packets: percentiles by linear interpolation between closest ranks
// (numpy's default), so anyone can recompute a packet's numbers from its raw samples.
#pragma once

#include <cstdint>
#include <span>

#include <nlohmann/json.hpp>

namespace fak::bench {

struct Summary {
  int64_t n = 0;
  double p50 = 0, p95 = 0, mean = 0, min = 0, max = 0;
};

// Percentile q in [0, 100] of the samples; 0 for an empty span.
double Percentile(std::span<const double> samples, double q);
Summary Summarize(std::span<const double> samples);

nlohmann::json SummaryToJson(const Summary& s);

// True when a and b agree to within a relative 1e-9 (or 1e-9 absolute near zero): tolerant of the
// last-digit rounding of JSON numbers, nothing more.
bool NearlyEqual(double a, double b);

}  // namespace fak::bench
