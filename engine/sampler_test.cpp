#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

namespace fak {
namespace {

// The distribution the sampler should draw from, computed independently: softmax(logits / T) over the
// top-k, then min-p against the likeliest, then the smallest prefix whose mass reaches top-p,
// renormalized. Tokens at -infinity are never candidates.
std::vector<double> Expected(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(logits.size()); ++i) {
    if (std::isfinite(logits[static_cast<size_t>(i)])) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < order.size()) order.resize(static_cast<size_t>(p.top_k));
  std::vector<double> w;
  for (int i : order)
    w.push_back(std::exp((logits[static_cast<size_t>(i)] - logits[order[0]]) / p.temperature));
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  size_t keep = w.size();
  if (p.min_p > 0) {
    keep = 1;
    while (keep < w.size() && w[keep] / sum >= p.min_p * w[0] / sum) ++keep;
  }
  if (p.top_p < 1) {
    double cum = 0;
    size_t i = 0;
    while (i < keep) {
      cum += w[i++] / sum;
      if (cum >= p.top_p) break;
    }
    keep = i;
  }
  std::vector<double> out(logits.size(), 0.0);
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += w[i];
  for (size_t i = 0; i < keep; ++i) out[static_cast<size_t>(order[i])] = w[i] / kept;
  return out;
}

// Pearson's chi-square of `draws` draws against `want`, and the 0.999 quantile of its distribution
// (Wilson-Hilferty): the test fails by chance once in a thousand seeds, and this seed is fixed.
void ExpectDrawsFollow(const std::vector<float>& logits, const SamplingParams& p, int draws) {
  const std::vector<double> want = Expected(logits, p);
  std::vector<int> got(logits.size(), 0);
  Sampler s(p);
  for (int i = 0; i < draws; ++i) {
    std::vector<float> l = logits;
    const int32_t t = s.Sample(l, {}, static_cast<uint64_t>(i));
    ASSERT_GT(want[static_cast<size_t>(t)], 0.0) << "token " << t << " is outside the kept set";
    ++got[static_cast<size_t>(t)];
  }
  double chi2 = 0;
  int df = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] <= 0) continue;
    const double e = want[i] * draws;
    chi2 += (got[i] - e) * (got[i] - e) / e;
    ++df;
  }
  if (df <= 0) return;
  const double z = 3.0902;  // the 0.999 quantile of the standard normal
  const double k = df;
  const double limit = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
  EXPECT_LT(chi2, limit) << "df " << df << " top_k " << p.top_k << " top_p " << p.top_p << " min_p "
                         << p.min_p;
}

TEST(Sampler, DrawsFollowTheTruncatedSoftmax) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0, 1.5f);
  std::vector<float> logits(64);
  for (auto& x : logits) x = n(rng);
  logits[5] = logits[17] = -std::numeric_limits<float>::infinity();  // refused by a grammar
  struct Case {
    float t, top_p, min_p;
    int top_k;
  };
  for (const Case c : {Case{1.0f, 1.0f, 0.0f, 0}, Case{0.7f, 1.0f, 0.0f, 0}, Case{1.0f, 1.0f, 0.0f, 10},
                       Case{1.0f, 0.9f, 0.0f, 0}, Case{1.3f, 1.0f, 0.05f, 0}, Case{0.9f, 0.8f, 0.02f, 30}}) {
    SamplingParams p;
    p.temperature = c.t;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.top_k = c.top_k;
    p.seed = 99;
    ExpectDrawsFollow(logits, p, 60000);
  }
}

// A 152k vocabulary with top-p keeping more than the first sorted block: the sorted prefix grows and
// the draws still follow the distribution (checked on the likeliest tokens and the kept set).
TEST(Sampler, LargeVocabularyTopPGrowsTheSortedPrefix) {
  std::mt19937 rng(4);
  std::normal_distribution<float> n(0, 1.0f);
  std::vector<float> logits(151936);
  for (auto& x : logits) x = n(rng);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.3f;  // thousands of tokens
  p.seed = 7;
  const std::vector<double> want = Expected(logits, p);
  const auto kept = std::count_if(want.begin(), want.end(), [](double w) { return w > 0; });
  EXPECT_GT(kept, 2000);
  Sampler s(p);
  for (int i = 0; i < 100; ++i) {
    std::vector<float> l = logits;
    const int32_t t = s.Sample(l, {}, static_cast<uint64_t>(i));
    ASSERT_GT(want[static_cast<size_t>(t)], 0.0) << t;
  }
}

TEST(Sampler, GreedyIsArgmax) {
  Sampler s(SamplingParams{});
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 1.9f};
  EXPECT_EQ(s.Sample(l, {}, 0), 1);
}

TEST(Sampler, SameSeedSameDrawsDifferentSeedDiffers) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  std::vector<float> base(100);
  for (int i = 0; i < 100; ++i) base[i] = static_cast<float>(i % 7) * 0.3f;
  auto run = [&](uint64_t seed) {
    SamplingParams q = p;
    q.seed = seed;
    Sampler s(q);
    std::vector<int32_t> out;
    for (uint64_t step = 0; step < 50; ++step) {
      std::vector<float> l = base;
      out.push_back(s.Sample(l, {}, step));
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, TopKAndTopPAndMinPRestrictTheSupport) {
  std::vector<float> base = {5.0f, 4.0f, 1.0f, 0.0f, -1.0f};
  auto support = [&](SamplingParams p) {
    std::map<int32_t, int> seen;
    Sampler s(p);
    for (uint64_t i = 0; i < 2000; ++i) {
      std::vector<float> l = base;
      ++seen[s.Sample(l, {}, i)];
    }
    return seen;
  };
  SamplingParams k;
  k.temperature = 1.0f;
  k.top_k = 2;
  auto sk = support(k);
  EXPECT_EQ(sk.size(), 2u);
  EXPECT_TRUE(sk.count(0) && sk.count(1));
  SamplingParams tp;
  tp.temperature = 1.0f;
  tp.top_p = 0.5f;  // token 0 alone has p ~0.70
  EXPECT_EQ(support(tp).size(), 1u);
  SamplingParams mp;
  mp.temperature = 1.0f;
  mp.min_p = 0.2f;  // p1/p0 = e^-1 = 0.37 kept, p2/p0 = e^-4 dropped
  EXPECT_EQ(support(mp).size(), 2u);
  SamplingParams all;
  all.temperature = 1.0f;
  EXPECT_EQ(support(all).size(), 5u);
}

TEST(Sampler, PenaltiesLowerRepeatedTokens) {
  std::vector<float> l = {2.0f, 1.9f};
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  Sampler s(p);
  std::vector<int32_t> hist = {0};
  EXPECT_EQ(s.Sample(l, hist, 0), 1);  // 2.0 / 1.5 < 1.9
  std::vector<float> m = {2.0f, 1.9f};
  SamplingParams f;
  f.frequency_penalty = 0.06f;
  Sampler sf(f);
  std::vector<int32_t> twice = {0, 0};
  EXPECT_EQ(sf.Sample(m, twice, 0), 1);  // 2.0 - 0.12 < 1.9
  std::vector<float> n = {2.0f, 1.9f};
  SamplingParams pr;
  pr.presence_penalty = 0.2f;
  Sampler sp(pr);
  EXPECT_EQ(sp.Sample(n, twice, 0), 1);
}

TEST(Sampler, ValidateNamesTheField) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_NE(p.Validate().message().find("top_p"), std::string::npos);
  p = SamplingParams{};
  p.temperature = -1;
  EXPECT_NE(p.Validate().message().find("temperature"), std::string::npos);
  EXPECT_TRUE(SamplingParams{}.Validate().ok());
  p = SamplingParams{};
  p.logit_bias = {{3, std::nanf("")}};
  EXPECT_NE(p.Validate().message().find("logit bias"), std::string::npos);
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_FALSE(p.Validate().ok());
  p.logit_bias = {{3, -std::numeric_limits<float>::infinity()}};
  EXPECT_TRUE(p.Validate().ok());
}

// A bias is added to the logit before penalties and sampling; -infinity bans a token, and ids past
// the vocabulary are ignored.
TEST(Sampler, LogitBiasMovesTheArgmaxAndBans) {
  SamplingParams p;
  p.logit_bias = {{1, 2.5f}, {0, -std::numeric_limits<float>::infinity()}, {99, 50.0f}};
  Sampler s(p);
  std::vector<float> logits = {3.0f, 1.0f, 2.0f};
  EXPECT_EQ(s.Sample(logits, {}, 0), 1);  // 1 + 2.5 beats 2; token 0 is banned
  p.temperature = 1.0f;
  p.logit_bias = {{0, -std::numeric_limits<float>::infinity()}};
  Sampler hot(p);
  for (uint64_t step = 0; step < 200; ++step) {
    std::vector<float> l = {5.0f, 0.0f, 0.0f};
    EXPECT_NE(hot.Sample(l, {}, step), 0);
  }
}

}  // namespace
}  // namespace fak
