#include "quant/q4_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "quant/f16.h"
#include "quant/round.h"

namespace fak {
namespace {

// Builds a block from its fields following the layout description bit by bit: bytes 0-3 hold sc0..3 in
// their low 6 bits and the top 2 bits of sc4..7; bytes 4-7 the same for m; bytes 8-11 hold the low 4
// bits of sc4..7 (low nibble) and m4..7 (high nibble).
std::vector<uint8_t> BuildQ4_K(uint16_t d, uint16_t dmin, const int* sc, const int* m, const int* q) {
  std::vector<uint8_t> raw(144, 0);
  raw[0] = d & 0xFF, raw[1] = d >> 8, raw[2] = dmin & 0xFF, raw[3] = dmin >> 8;
  uint8_t* s = raw.data() + 4;
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 0x3F) + 64 * (sc[j + 4] / 16));
    s[j + 4] = static_cast<uint8_t>((m[j] & 0x3F) + 64 * (m[j + 4] / 16));
    s[j + 8] = static_cast<uint8_t>(sc[j + 4] % 16 + 16 * (m[j + 4] % 16));
  }
  uint8_t* qs = raw.data() + 16;
  for (int i = 0; i < 256; ++i) {
    const int chunk = i / 64, within = i % 64;
    if (within < 32)
      qs[32 * chunk + within] |= static_cast<uint8_t>(q[i]);
    else
      qs[32 * chunk + within - 32] |= static_cast<uint8_t>(q[i] * 16);
  }
  return raw;
}

TEST(Q4_K, DequantizeFollowsTheByteLayout) {
  std::mt19937 rng(5);
  int sc[8], m[8], q[256];
  for (int j = 0; j < 8; ++j) sc[j] = rng() % 64, m[j] = rng() % 64;
  sc[7] = 63, m[5] = 63, sc[4] = 0;
  for (int& v : q) v = rng() % 16;
  const uint16_t d = Fp32ToFp16(0.0123f), dmin = Fp32ToFp16(0.0031f);
  const auto raw = BuildQ4_K(d, dmin, sc, m, q);
  BlockQ4_K block;
  std::memcpy(&block, raw.data(), 144);
  float y[256];
  DequantizeRowQ4_K(&block, y, 256);
  for (int i = 0; i < 256; ++i) {
    const float d1 = Fp16ToFp32(d) * static_cast<float>(sc[i / 32]);
    const float m1 = Fp16ToFp32(dmin) * static_cast<float>(m[i / 32]);
    ASSERT_EQ(y[i], d1 * static_cast<float>(q[i]) - m1) << i;
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t s, mm;
    Q4_KScaleMin(j, block.scales, &s, &mm);
    EXPECT_EQ(s, sc[j]);
    EXPECT_EQ(mm, m[j]);
  }
}

TEST(Q4_K, QuantizeRoundTrip) {
  std::mt19937 rng(6);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(256 * 16), y(x.size());
  for (auto& v : x) v = g(rng);
  std::vector<BlockQ4_K> b(16);
  QuantizeRowQ4_K(x.data(), b.data(), static_cast<int64_t>(x.size()));
  DequantizeRowQ4_K(b.data(), y.data(), static_cast<int64_t>(x.size()));
  double se = 0, sx = 0;
  for (size_t i = 0; i < x.size(); ++i) se += (x[i] - y[i]) * (x[i] - y[i]), sx += x[i] * x[i];
  EXPECT_LT(std::sqrt(se / sx), 0.12);  // 4-bit with per-32 scales: roughly 8-10% relative RMSE
}

TEST(Q4_K, ReferenceDotMatchesDequantizedDot) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(1024), a(1024), xd(1024), ad(1024);
  for (auto& v : x) v = g(rng);
  for (auto& v : a) v = g(rng);
  std::vector<BlockQ4_K> wq(4);
  std::vector<BlockQ8_K> aq(4);
  QuantizeRowQ4_K(x.data(), wq.data(), 1024);
  QuantizeRowQ8_K(a.data(), aq.data(), 1024);
  DequantizeRowQ4_K(wq.data(), xd.data(), 1024);
  DequantizeRowQ8_K(aq.data(), ad.data(), 1024);
  double expect = 0;
  for (int i = 0; i < 1024; ++i) expect += static_cast<double>(xd[i]) * ad[i];
  EXPECT_NEAR(VecDotQ4_KQ8_K(1024, wq.data(), aq.data()), expect, 1e-4 * 32);
}

TEST(RoundHalfEven, EqualsNearbyint) {
  for (float v : {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.49999997f, 14.5f, 15.5f, -0.0f, 0.0f, 4194303.5f,
                  -4194303.5f, 1e-30f}) {
    EXPECT_EQ(RoundHalfEven(v), std::nearbyint(v)) << v;
  }
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> wide(-4e6f, 4e6f), narrow(-20.0f, 20.0f);
  for (int i = 0; i < 200000; ++i) {
    const float a = wide(rng), b = narrow(rng);
    ASSERT_EQ(RoundHalfEven(a), std::nearbyint(a)) << a;
    ASSERT_EQ(RoundHalfEven(b), std::nearbyint(b)) << b;
  }
  // Out of range magnitudes keep their side of a small clamp.
  for (float v : {1e7f, 1e30f, INFINITY}) {
    EXPECT_EQ(std::clamp(RoundHalfEven(v), 0.0f, 15.0f), 15.0f);
    EXPECT_EQ(std::clamp(RoundHalfEven(-v), 0.0f, 15.0f), 0.0f);
  }
}

// The quantizer's bytes for a fixed input, including an all-zero block, a block of few distinct values
// and an outlier. GgufQuantize.BytesEqualLlamaQuantize shows these bytes equal llama-quantize's on real
// tensors; this pin keeps them in the builds that have no fixtures (the arm64 cross build) and keeps
// files written by `fak quantize` and `fak synth` byte-identical from one version to the next.
TEST(Q4_K, QuantizerBytesArePinned) {
  std::mt19937 rng(77);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(256 * 64);
  for (float& v : x) v = normal(rng);
  for (int i = 0; i < 256; ++i) x[256 * 7 + i] = 0.0f;                               // an all-zero block
  for (int i = 0; i < 256; ++i) x[256 * 9 + i] = 1e-3f * static_cast<float>(i % 7);  // few distinct values
  x[100] = 0.5f;                                                                     // an outlier
  std::vector<BlockQ4_K> y(64);
  QuantizeRowQ4_K(x.data(), y.data(), static_cast<int64_t>(x.size()));
  // FNV-1a 64 over the bytes (no OpenSSL here: this test also runs in the arm64 cross build).
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* bytes = reinterpret_cast<const uint8_t*>(y.data());
  for (size_t i = 0; i < y.size() * sizeof(BlockQ4_K); ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  EXPECT_EQ(h, 0x9b01883a19fe4203ull) << std::hex << h;
}

}  // namespace
}  // namespace fak
