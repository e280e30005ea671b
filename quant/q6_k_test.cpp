#include "quant/q6_k.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "quant/f16.h"

namespace fak {
namespace {

// Places 6-bit quant i of a super-block following the layout description: within each 128-element
// half, element e = 32 * k + l (k in 0..3) keeps its low 4 bits in ql[(k & 1) * 32 + l] (low nibble
// for k < 2, high nibble otherwise) and its top 2 bits in qh[l] at bit 2 * k.
std::vector<uint8_t> BuildQ6_K(uint16_t d, const int* sc, const int* q) {
  std::vector<uint8_t> raw(210, 0);
  for (int i = 0; i < 256; ++i) {
    const int half = i / 128, e = i % 128, k = e / 32, l = e % 32;
    uint8_t& ql = raw[64 * half + (k & 1) * 32 + l];
    ql |= static_cast<uint8_t>((q[i] & 15) << (k < 2 ? 0 : 4));
    raw[128 + 32 * half + l] |= static_cast<uint8_t>((q[i] >> 4) << (2 * k));
  }
  for (int j = 0; j < 16; ++j) raw[192 + j] = static_cast<uint8_t>(static_cast<int8_t>(sc[j]));
  raw[208] = d & 0xFF, raw[209] = d >> 8;
  return raw;
}

TEST(Q6_K, DequantizeFollowsTheByteLayout) {
  std::mt19937 rng(8);
  int sc[16], q[256];
  for (int& s : sc) s = static_cast<int>(rng() % 256) - 128;
  for (int& v : q) v = rng() % 64;
  q[0] = 0, q[255] = 63;
  const uint16_t d = Fp32ToFp16(-0.0071f);
  const auto raw = BuildQ6_K(d, sc, q);
  BlockQ6_K block;
  std::memcpy(&block, raw.data(), 210);
  float y[256];
  DequantizeRowQ6_K(&block, y, 256);
  for (int i = 0; i < 256; ++i) {
    const float s = Fp16ToFp32(d) * static_cast<float>(sc[i / 16]);
    ASSERT_EQ(y[i], s * static_cast<float>(q[i] - 32)) << i;
  }
}

TEST(Q6_K, QuantizeRoundTripAndDot) {
  std::mt19937 rng(9);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(1024), a(1024), xd(1024), ad(1024);
  for (auto& v : x) v = g(rng);
  for (auto& v : a) v = g(rng);
  std::vector<BlockQ6_K> wq(4);
  std::vector<BlockQ8_K> aq(4);
  QuantizeRowQ6_K(x.data(), wq.data(), 1024);
  QuantizeRowQ8_K(a.data(), aq.data(), 1024);
  DequantizeRowQ6_K(wq.data(), xd.data(), 1024);
  DequantizeRowQ8_K(aq.data(), ad.data(), 1024);
  double se = 0, sx = 0, expect = 0;
  for (int i = 0; i < 1024; ++i) {
    se += (x[i] - xd[i]) * (x[i] - xd[i]), sx += x[i] * x[i];
    expect += static_cast<double>(xd[i]) * ad[i];
  }
  EXPECT_LT(std::sqrt(se / sx), 0.03);
  EXPECT_NEAR(VecDotQ6_KQ8_K(1024, wq.data(), aq.data()), expect, 1e-4 * 32);
}

}  // namespace
}  // namespace fak
