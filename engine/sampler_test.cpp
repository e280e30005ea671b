#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <map>

namespace fak {
namespace {

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
}

}  // namespace
}  // namespace fak
