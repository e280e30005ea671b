#include "quant/q4_k.h"

#include <algorithm>
#include <cmath>

#include "quant/f16.h"  // Fp16ToFp32, Fp32ToFp16
#include "quant/round.h"

namespace fak {
namespace {

// Fits x[0..32) ~ scale * q - min with q in [0, 15] and min >= 0, trying a small grid of ranges around
// [lo, hi] and keeping the one with the lowest squared error.
void FitSubBlock(const float* x, float* scale, float* min) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < 32; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  lo = std::min(lo, 0.0f);
  if (hi <= lo) {
    *scale = 0.0f;
    *min = -lo;
    return;
  }
  float best_err = INFINITY, best_scale = (hi - lo) / 15.0f, best_lo = lo;
  for (int step = 0; step <= 16; ++step) {
    // Shrink the range from either side: clipping a few outliers often lowers the total error.
    for (int side = 0; side < 2; ++side) {
      const float shrink = 1.0f - 0.02f * static_cast<float>(step);
      const float l = side == 0 ? lo : lo * shrink;
      const float h = side == 0 ? hi * shrink : hi;
      if (h <= l) continue;
      const float s = (h - l) / 15.0f;
      const float is = 1.0f / s;
      float err = 0.0f;
      for (int i = 0; i < 32; ++i) {
        const float q = std::clamp(RoundHalfEven((x[i] - l) * is), 0.0f, 15.0f);
        const float e = s * q + l - x[i];
        err += e * e;
      }
      if (err < best_err) {
        best_err = err;
        best_scale = s;
        best_lo = l;
      }
    }
  }
  *scale = best_scale;
  *min = -best_lo;
}

}  // namespace

void QuantizeRowQ4_K(const float* x, BlockQ4_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQK_K;
    float scale[8], min[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
      FitSubBlock(xb + 32 * j, &scale[j], &min[j]);
      max_scale = std::max(max_scale, scale[j]);
      max_min = std::max(max_min, min[j]);
    }
    const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
    BlockQ4_K& out = y[b];
    out.d = Fp32ToFp16(d);
    out.dmin = Fp32ToFp16(dmin);
    const float dq = Fp16ToFp32(out.d), dminq = Fp16ToFp32(out.dmin);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(dq > 0 ? std::clamp(std::nearbyint(scale[j] / dq), 0.0f, 63.0f) : 0);
      m[j] = static_cast<uint8_t>(dminq > 0 ? std::clamp(std::nearbyint(min[j] / dminq), 0.0f, 63.0f) : 0);
    }
    for (int j = 0; j < 4; ++j) {
      out.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
      out.scales[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
      out.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
    // Quantize with the scales as they will be decoded.
    uint8_t q[kQK_K];
    for (int j = 0; j < 8; ++j) {
      const float s = dq * static_cast<float>(sc[j]);
      const float mn = dminq * static_cast<float>(m[j]);
      const float is = s != 0.0f ? 1.0f / s : 0.0f;
      for (int i = 0; i < 32; ++i) {
        const float v = RoundHalfEven((xb[32 * j + i] + mn) * is);
        q[32 * j + i] = static_cast<uint8_t>(std::clamp(v, 0.0f, 15.0f));
      }
    }
    for (int c = 0; c < 4; ++c) {
      for (int i = 0; i < 32; ++i) {
        out.qs[32 * c + i] = static_cast<uint8_t>(q[64 * c + i] | (q[64 * c + 32 + i] << 4));
      }
    }
  }
}

void DequantizeRowQ4_K(const BlockQ4_K* x, float* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    const float d = Fp16ToFp32(x[b].d), dmin = Fp16ToFp32(x[b].dmin);
    float* yb = y + b * kQK_K;
    for (int c = 0; c < 4; ++c) {
      uint8_t sc0, m0, sc1, m1;
      Q4_KScaleMin(2 * c, x[b].scales, &sc0, &m0);
      Q4_KScaleMin(2 * c + 1, x[b].scales, &sc1, &m1);
      const float d0 = d * sc0, mm0 = dmin * m0, d1 = d * sc1, mm1 = dmin * m1;
      const uint8_t* q = x[b].qs + 32 * c;
      for (int i = 0; i < 32; ++i) yb[64 * c + i] = d0 * static_cast<float>(q[i] & 0xF) - mm0;
      for (int i = 0; i < 32; ++i) yb[64 * c + 32 + i] = d1 * static_cast<float>(q[i] >> 4) - mm1;
    }
  }
}

void BlockDotQ4_KQ8_K(const BlockQ4_K& w, const BlockQ8_K& a, int32_t* sum, int32_t* min_sum) {
  int32_t s = 0, ms = 0;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    Q4_KScaleMin(j, w.scales, &sc, &m);
    const uint8_t* q = w.qs + 32 * (j / 2);
    const int shift = (j & 1) * 4;
    int32_t isum = 0;
    for (int i = 0; i < 32; ++i) isum += ((q[i] >> shift) & 0xF) * static_cast<int32_t>(a.qs[32 * j + i]);
    s += sc * isum;
    ms += m * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
  }
  *sum = s;
  *min_sum = ms;
}

float VecDotQ4_KQ8_K(int64_t n, const BlockQ4_K* w, const BlockQ8_K* a) {
  const int64_t nb = n / kQK_K;
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t s, ms;
    BlockDotQ4_KQ8_K(w[b], a[b], &s, &ms);
    const float dd = a[b].d * Fp16ToFp32(w[b].d);
    const float dm = a[b].d * Fp16ToFp32(w[b].dmin);
    acc = acc + (dd * static_cast<float>(s) - dm * static_cast<float>(ms));
  }
  return acc;
}

}  // namespace fak
