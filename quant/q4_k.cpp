#include "quant/q4_k.h"

#include <algorithm>
#include <cmath>

#include "quant/f16.h"  // Fp16ToFp32, Fp32ToFp16
#include "quant/round.h"

namespace fak {
namespace {

// Fits x[0..32) ~ scale * q + offset with q in [0, 15] and offset <= 0, minimizing the error weighted
// by w. Starts from the full range [min(x, 0), max(x)], then tries 21 slightly different step counts
// (14 to 16 steps over the range); for each it rounds, solves the weighted least-squares line through
// the rounded levels in closed form (offset pinned to 0 when it comes out positive) and keeps the fit
// with the lowest weighted squared error. This is the search llama.cpp's reference quantizer runs, in
// the same order of float operations, so that files match llama-quantize's byte for byte. Writes the
// chosen levels to q and -offset to *min; returns the scale.
float FitSubBlock(const float* x, const float* w, uint8_t* q, float* min) {
  constexpr int kN = 32, kMaxLevel = 15, kSteps = 20;
  constexpr float kFirstDelta = -1.0f, kDeltaStep = 0.1f;
  float lo = x[0], hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < kN; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    std::fill(q, q + kN, uint8_t{0});
    *min = -lo;
    return 0.0f;
  }
  float inv = kMaxLevel / (hi - lo);
  float scale = 1 / inv;
  float best_err = 0.0f;
  for (int i = 0; i < kN; ++i) {
    q[i] = static_cast<uint8_t>(RoundClamped(inv * (x[i] - lo), 0.0f, kMaxLevel));
    const float diff = scale * q[i] + lo - x[i];
    best_err += w[i] * (diff * diff);
  }
  uint8_t trial[kN];
  for (int step = 0; step <= kSteps; ++step) {
    inv = (kFirstDelta + kDeltaStep * step + kMaxLevel) / (hi - lo);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < kN; ++i) {
      const int l = RoundClamped(inv * (x[i] - lo), 0.0f, kMaxLevel);
      trial[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float s = (sum_w * sum_xl - sum_x * sum_l) / det;
    float offset = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (offset > 0.0f) {
      offset = 0.0f;
      s = sum_xl / sum_l2;
    }
    float err = 0.0f;
    for (int i = 0; i < kN; ++i) {
      const float diff = s * trial[i] + offset - x[i];
      err += w[i] * (diff * diff);
    }
    if (err < best_err) {
      std::copy(trial, trial + kN, q);
      best_err = err;
      scale = s;
      lo = offset;
    }
  }
  *min = -lo;
  return scale;
}

}  // namespace

void QuantizeRowQ4_K(const float* x, BlockQ4_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQK_K;
    uint8_t q[kQK_K];
    float scale[8], min[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
      // Weights favour the larger values of the sub-block: w_i = rms(x) + |x_i|.
      const float* xs = xb + 32 * j;
      float sum_x2 = 0.0f;
      for (int i = 0; i < 32; ++i) sum_x2 += xs[i] * xs[i];
      const float rms = std::sqrt(sum_x2 / 32);
      float w[32];
      for (int i = 0; i < 32; ++i) w[i] = rms + std::fabs(xs[i]);
      scale[j] = FitSubBlock(xs, w, q + 32 * j, &min[j]);
      if (scale[j] > max_scale) max_scale = scale[j];
      if (min[j] > max_min) max_min = min[j];
    }
    BlockQ4_K& out = y[b];
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
      // A negative fit wraps like an unsigned byte and saturates at 63, as in llama.cpp.
      sc[j] = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_scale * scale[j])));
      m[j] = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_min * min[j])));
    }
    for (int j = 0; j < 4; ++j) {
      out.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
      out.scales[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
      out.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
    out.d = Fp32ToFp16(max_scale / 63.0f);
    out.dmin = Fp32ToFp16(max_min / 63.0f);
    // Requantize with the scales as they will be decoded; a sub-block whose decoded scale is zero
    // keeps the levels of its fit.
    const float dq = Fp16ToFp32(out.d), dminq = Fp16ToFp32(out.dmin);
    for (int j = 0; j < 8; ++j) {
      const float s = dq * sc[j];
      if (s == 0.0f) continue;
      const float mn = dminq * m[j];
      for (int i = 0; i < 32; ++i) {
        q[32 * j + i] = static_cast<uint8_t>(RoundClamped((xb[32 * j + i] + mn) / s, 0.0f, 15.0f));
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
