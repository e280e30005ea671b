#include "bench/stats.h"

#include <gtest/gtest.h>

#include <vector>

namespace fak::bench {
namespace {

TEST(Stats, PercentileInterpolatesBetweenClosestRanks) {
  const std::vector<double> v = {4, 1, 3, 2};  // numpy.percentile: 50 -> 2.5, 95 -> 3.85
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_NEAR(Percentile(v, 95), 3.85, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{7}, 95), 7);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{}, 50), 0);
}

TEST(Stats, SummaryOrdersAndCounts) {
  std::vector<double> v;
  for (int i = 1; i <= 20; ++i) v.push_back(i);
  const Summary s = Summarize(v);
  EXPECT_EQ(s.n, 20);
  EXPECT_DOUBLE_EQ(s.p50, 10.5);
  EXPECT_NEAR(s.p95, 19.05, 1e-12);
  EXPECT_DOUBLE_EQ(s.mean, 10.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 20);
  const auto j = SummaryToJson(s);
  EXPECT_EQ(j["n"], 20);
  EXPECT_DOUBLE_EQ(j["p95"].get<double>(), s.p95);
}

TEST(Stats, NearlyEqualToleratesOnlyRounding) {
  EXPECT_TRUE(NearlyEqual(1.0, 1.0 + 1e-12));
  EXPECT_TRUE(NearlyEqual(0.0, 1e-12));
  EXPECT_FALSE(NearlyEqual(100.0, 100.001));
  EXPECT_FALSE(NearlyEqual(0.0, 1e-6));
}

}  // namespace
}  // namespace fak::bench
