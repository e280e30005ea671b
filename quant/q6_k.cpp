#include "quant/q6_k.h"

#include <algorithm>
#include <cmath>

#include "quant/f16.h"  // Fp16ToFp32, Fp32ToFp16
#include "quant/round.h"

namespace fak {

void UnpackQ6_K(const BlockQ6_K& b, uint8_t* q) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    uint8_t* out = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<uint8_t>((ql[l] & 0xF) | ((qh[l] & 3) << 4));
      out[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      out[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      out[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
}

namespace {

// Below this magnitude a sub-block or super-block counts as all zero.
constexpr float kGroupMaxEps = 1e-15f;

// Fits x[0..16) ~ scale * l with l in [-32, 31], weighting each value by x_i^2 (large values matter
// most). The largest-magnitude value fixes the sign of the scale so that it maps to -32, the side of
// the range with one more level; then 18 neighbouring step sizes (32 +- 0.1k levels over that value)
// are tried, each scored by the weighted least-squares scale of its rounded levels, keeping the one
// that explains the most weighted energy. The same search as llama.cpp's reference quantizer, in the
// same order of float operations. Writes levels + 32 to q; returns the scale.
float FitSubBlock(const float* x, uint8_t* q) {
  constexpr int kN = 16, kHalf = 32;
  float peak = 0.0f, peak_abs = 0.0f;
  for (int i = 0; i < kN; ++i) {
    const float a = std::fabs(x[i]);
    if (a > peak_abs) {
      peak_abs = a;
      peak = x[i];
    }
  }
  if (peak_abs < kGroupMaxEps) {
    std::fill(q, q + kN, uint8_t{0});
    return 0.0f;
  }
  auto level = [](float inv, float v) { return RoundClamped(inv * v, -kHalf, kHalf - 1); };
  float inv = -kHalf / peak;
  float sum_lx = 0.0f, sum_l2 = 0.0f;
  for (int i = 0; i < kN; ++i) {
    const int l = level(inv, x[i]);
    q[i] = static_cast<uint8_t>(l + kHalf);
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * l;
    sum_l2 += w * l * l;
  }
  float scale = sum_l2 != 0.0f ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    inv = -(kHalf + 0.1f * k) / peak;
    sum_lx = sum_l2 = 0.0f;
    for (int i = 0; i < kN; ++i) {
      const int l = level(inv, x[i]);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * l;
      sum_l2 += w * l * l;
    }
    if (sum_l2 > 0.0f && sum_lx * sum_lx > best * sum_l2) {
      for (int i = 0; i < kN; ++i) q[i] = static_cast<uint8_t>(level(inv, x[i]) + kHalf);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

}  // namespace

void QuantizeRowQ6_K(const float* x, BlockQ6_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQK_K;
    BlockQ6_K& out = y[b];
    uint8_t q[kQK_K];
    float sub_scale[16];
    float max_abs_scale = 0.0f, max_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      sub_scale[j] = FitSubBlock(xb + 16 * j, q + 16 * j);
      if (std::fabs(sub_scale[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(sub_scale[j]);
        max_scale = sub_scale[j];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      out = BlockQ6_K{};
      continue;
    }
    // The largest sub-block scale maps to -128, the int8 level with no positive counterpart.
    const float inv = -128.0f / max_scale;
    out.d = Fp32ToFp16(1 / inv);
    for (int j = 0; j < 16; ++j)
      out.scales[j] = static_cast<int8_t>(std::min(127, NearestInt(inv * sub_scale[j])));
    // Requantize with the scales as they will be decoded; a sub-block whose decoded scale is zero
    // keeps the levels of its fit.
    const float dq = Fp16ToFp32(out.d);
    for (int j = 0; j < 16; ++j) {
      const float s = dq * out.scales[j];
      if (s == 0.0f) continue;
      for (int i = 0; i < 16; ++i) {
        q[16 * j + i] = static_cast<uint8_t>(RoundClamped(xb[16 * j + i] / s, -32.0f, 31.0f) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const uint8_t* qq = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        out.ql[64 * h + l] = static_cast<uint8_t>((qq[l] & 0xF) | ((qq[l + 64] & 0xF) << 4));
        out.ql[64 * h + l + 32] = static_cast<uint8_t>((qq[l + 32] & 0xF) | ((qq[l + 96] & 0xF) << 4));
        out.qh[32 * h + l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) |
                                                  ((qq[l + 64] >> 4) << 4) | ((qq[l + 96] >> 4) << 6));
      }
    }
  }
}

void DequantizeRowQ6_K(const BlockQ6_K* x, float* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  uint8_t q[kQK_K];
  for (int64_t b = 0; b < nb; ++b) {
    const float d = Fp16ToFp32(x[b].d);
    UnpackQ6_K(x[b], q);
    for (int i = 0; i < kQK_K; ++i) {
      const float s = d * static_cast<float>(x[b].scales[i / 16]);
      y[b * kQK_K + i] = s * static_cast<float>(static_cast<int>(q[i]) - 32);
    }
  }
}

int32_t BlockDotQ6_KQ8_K(const BlockQ6_K& w, const BlockQ8_K& a) {
  uint8_t q[kQK_K];
  UnpackQ6_K(w, q);
  int32_t s = 0;
  for (int j = 0; j < 16; ++j) {
    int32_t isum = 0;
    for (int i = 0; i < 16; ++i) isum += (static_cast<int32_t>(q[16 * j + i]) - 32) * a.qs[16 * j + i];
    s += w.scales[j] * isum;
  }
  return s;
}

float VecDotQ6_KQ8_K(int64_t n, const BlockQ6_K* w, const BlockQ8_K* a) {
  const int64_t nb = n / kQK_K;
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const float dd = a[b].d * Fp16ToFp32(w[b].d);
    acc = acc + dd * static_cast<float>(BlockDotQ6_KQ8_K(w[b], a[b]));
  }
  return acc;
}

}  // namespace fak
