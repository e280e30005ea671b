#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace fak::bench {

double Percentile(std::span<const double> samples, double q) {
  if (samples.empty()) return 0;
  std::vector<double> v(samples.begin(), samples.end());
  std::sort(v.begin(), v.end());
  const double rank = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

Summary Summarize(std::span<const double> samples) {
  Summary s;
  s.n = static_cast<int64_t>(samples.size());
  if (samples.empty()) return s;
  s.p50 = Percentile(samples, 50);
  s.p95 = Percentile(samples, 95);
  double sum = 0;
  for (double x : samples) sum += x;
  s.mean = sum / static_cast<double>(samples.size());
  const auto [mn, mx] = std::minmax_element(samples.begin(), samples.end());
  s.min = *mn;
  s.max = *mx;
  return s;
}

nlohmann::json SummaryToJson(const Summary& s) {
  return {{"n", s.n}, {"p50", s.p50}, {"p95", s.p95}, {"mean", s.mean}, {"min", s.min}, {"max", s.max}};
}

bool NearlyEqual(double a, double b) {
  const double scale = std::max({1.0, std::fabs(a), std::fabs(b)});
  return std::fabs(a - b) <= 1e-9 * scale;
}

}  // namespace fak::bench
