#include "quant/f16.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace fak {
namespace {

TEST(F16, KnownValues) {
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3C00);
  EXPECT_EQ(Fp32ToFp16(-2.0f), 0xC000);
  EXPECT_EQ(Fp32ToFp16(65504.0f), 0x7BFF);
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7C00);  // rounds up to inf
  EXPECT_EQ(Fp32ToFp16(65519.0f), 0x7BFF);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -25)), 0x0000);         // tie rounds to even (zero)
  EXPECT_EQ(Fp32ToFp16(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 ulp -> 2
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie to even
  EXPECT_EQ(Fp32ToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(Fp32ToFp16(INFINITY), 0x7C00);
  EXPECT_TRUE(std::isnan(Fp16ToFp32(Fp32ToFp16(NAN))));
  EXPECT_EQ(Fp16ToFp32(0x3555), 0.333251953125f);
  EXPECT_EQ(Fp16ToFp32(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(Fp16ToFp32(0x03FF), std::ldexp(1023.0f, -24));
}

TEST(F16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    // Value check against an independent formula.
    const int e = (h >> 10) & 31, m = h & 1023;
    const double expect = (h & 0x8000 ? -1.0 : 1.0) * (e == 0    ? std::ldexp(m, -24)
                                                       : e == 31 ? INFINITY
                                                                 : std::ldexp(1024 + m, e - 25));
    ASSERT_EQ(static_cast<double>(f), expect) << h;
    ASSERT_EQ(Fp32ToFp16(f), h) << h;
  }
}

TEST(F16, RoundsToNearest) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = u(rng) * std::ldexp(1.0f, -static_cast<int>(rng() % 30));
    const uint16_t h = Fp32ToFp16(x);
    const float y = Fp16ToFp32(h);
    if (std::isinf(y)) continue;
    // No other finite half is closer.
    const float lo = Fp16ToFp32(static_cast<uint16_t>(h - 1)), hi = Fp16ToFp32(static_cast<uint16_t>(h + 1));
    if (!std::isnan(lo)) {
      EXPECT_LE(std::fabs(y - x), std::fabs(lo - x));
    }
    if (!std::isnan(hi) && (h & 0x7FFF) != 0x7BFF) {
      EXPECT_LE(std::fabs(y - x), std::fabs(hi - x));
    }
  }
}

TEST(Bf16, KnownValues) {
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Bf16ToFp32(0x3F80), 1.0f);
  EXPECT_EQ(Fp32ToBf16(BitsToFloat(0x3F808000u)), 0x3F80);  // tie to even
  EXPECT_EQ(Fp32ToBf16(BitsToFloat(0x3F818000u)), 0x3F82);
  EXPECT_EQ(Fp32ToBf16(BitsToFloat(0x3F808001u)), 0x3F81);
  EXPECT_TRUE(std::isnan(Bf16ToFp32(Fp32ToBf16(NAN))));
  EXPECT_EQ(Fp32ToBf16(-INFINITY), 0xFF80);
}

TEST(HalfDot, MatchesDoubleWithinRounding) {
  std::mt19937 rng(2);
  std::normal_distribution<float> g;
  const int n = 1000;
  std::vector<uint16_t> w(n), wb(n);
  std::vector<float> x(n), wf(n);
  for (int i = 0; i < n; ++i) {
    w[i] = Fp32ToFp16(g(rng));
    wb[i] = Fp32ToBf16(g(rng));
    x[i] = g(rng);
  }
  double e1 = 0, e2 = 0;
  for (int i = 0; i < n; ++i) {
    e1 += static_cast<double>(Fp16ToFp32(w[i])) * x[i];
    e2 += static_cast<double>(Bf16ToFp32(wb[i])) * x[i];
  }
  EXPECT_NEAR(VecDotF16F32(n, w.data(), x.data()), e1, 1e-3);
  EXPECT_NEAR(VecDotBf16F32(n, wb.data(), x.data()), e2, 1e-3);
}

}  // namespace
}  // namespace fak
