#include "quant/q8_0.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "quant/f16.h"

namespace fak {
namespace {

TEST(Q8_0, DequantizeFollowsTheByteLayout) {
  // Two blocks written byte by byte: little-endian f16 scale, then 32 int8 quants.
  uint8_t raw[68];
  const uint16_t d0 = 0x3800;  // 0.5
  const uint16_t d1 = 0xB400;  // -0.25
  raw[0] = d0 & 0xFF, raw[1] = d0 >> 8;
  raw[34] = d1 & 0xFF, raw[35] = d1 >> 8;
  for (int i = 0; i < 32; ++i) {
    raw[2 + i] = static_cast<uint8_t>(i * 9 - 128);
    raw[36 + i] = static_cast<uint8_t>(255 - i);
  }
  BlockQ8_0 blocks[2];
  std::memcpy(blocks, raw, sizeof(raw));
  float y[64];
  DequantizeRowQ8_0(blocks, y, 64);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(y[i], 0.5f * static_cast<int8_t>(static_cast<uint8_t>(i * 9 - 128))) << i;
    EXPECT_EQ(y[32 + i], -0.25f * static_cast<int8_t>(static_cast<uint8_t>(255 - i))) << i;
  }
}

TEST(Q8_0, QuantizeRoundTripIsWithinHalfAStep) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 2.0f);
  std::vector<float> x(32 * 64), y(x.size());
  for (auto& v : x) v = g(rng);
  for (int i = 0; i < 32; ++i) x[5 * 32 + i] = 0.0f;  // an all-zero block
  std::vector<BlockQ8_0> q(x.size() / 32);
  QuantizeRowQ8_0(x.data(), q.data(), static_cast<int64_t>(x.size()));
  DequantizeRowQ8_0(q.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t b = 0; b < q.size(); ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[b * 32 + i]));
    const float d = Fp16ToFp32(q[b].d);
    EXPECT_NEAR(d, amax / 127, amax / 127 * 1e-3);
    for (int i = 0; i < 32; ++i) {
      EXPECT_LE(std::fabs(y[b * 32 + i] - x[b * 32 + i]), 0.5f * d + 1e-3f * amax);
      EXPECT_GE(q[b].qs[i], -127);
    }
  }
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[5 * 32 + i], 0.0f);
}

// Exact halves: weights round away from zero like llama.cpp's reference quantizer (so `fak quantize`
// writes llama-quantize's bytes), activations to even like its SIMD activation quantizers.
TEST(Q8_0, WeightsRoundTiesAwayActivationsToEven) {
  float x[kQK8_0] = {127.0f, 0.5f, -0.5f, 2.5f, -2.5f, 3.5f, 1.25f};
  BlockQ8_0 w, a;
  QuantizeWeightsQ8_0(x, &w, kQK8_0);
  QuantizeRowQ8_0(x, &a, kQK8_0);
  EXPECT_EQ(Fp16ToFp32(w.d), 1.0f);
  const int expect_w[] = {127, 1, -1, 3, -3, 4, 1}, expect_a[] = {127, 0, 0, 2, -2, 4, 1};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(w.qs[i], expect_w[i]) << i;
    EXPECT_EQ(a.qs[i], expect_a[i]) << i;
  }
}

TEST(Q8_0, ReferenceDotFollowsTheDocumentedOrder) {
  std::mt19937 rng(4);
  std::vector<BlockQ8_0> w(8), a(8);
  for (int b = 0; b < 8; ++b) {
    w[b].d = Fp32ToFp16(0.01f * (b + 1));
    a[b].d = Fp32ToFp16(0.02f / (b + 1));
    for (int i = 0; i < 32; ++i) {
      w[b].qs[i] = static_cast<int8_t>(rng() % 256 - 128);
      a[b].qs[i] = static_cast<int8_t>(rng() % 255 - 127);
    }
  }
  float acc = 0;
  double exact = 0;
  for (int b = 0; b < 8; ++b) {
    int isum = 0;
    for (int i = 0; i < 32; ++i) isum += w[b].qs[i] * a[b].qs[i];
    volatile float s = Fp16ToFp32(w[b].d) * Fp16ToFp32(a[b].d);
    volatile float t = s * static_cast<float>(isum);
    acc = acc + t;
    exact += static_cast<double>(Fp16ToFp32(w[b].d)) * Fp16ToFp32(a[b].d) * isum;
  }
  EXPECT_EQ(VecDotQ8_0Q8_0(256, w.data(), a.data()), acc);
  EXPECT_NEAR(acc, exact, 1e-4 * std::fabs(exact) + 1e-6);
}

}  // namespace
}  // namespace fak
