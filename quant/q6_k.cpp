#include "quant/q6_k.h"

#include <algorithm>
#include <cmath>

#include "quant/f16.h"  // Fp16ToFp32, Fp32ToFp16

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

void QuantizeRowQ6_K(const float* x, BlockQ6_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQK_K;
    // Sub-block scale from the signed value of largest magnitude, mapped to -32 so the full range of
    // q - 32 in [-32, 31] is used on the side that matters.
    float sub_scale[16];
    float max_abs_scale = 0.0f, max_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      float amax = 0.0f, vmax = 0.0f;
      for (int i = 0; i < 16; ++i) {
        const float v = xb[16 * j + i];
        if (std::fabs(v) > amax) {
          amax = std::fabs(v);
          vmax = v;
        }
      }
      sub_scale[j] = vmax / -32.0f;
      if (std::fabs(sub_scale[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(sub_scale[j]);
        max_scale = sub_scale[j];
      }
    }
    BlockQ6_K& out = y[b];
    const float d = max_scale / -128.0f;
    out.d = Fp32ToFp16(d);
    const float dq = Fp16ToFp32(out.d);
    const float id = dq != 0.0f ? 1.0f / dq : 0.0f;
    uint8_t q[kQK_K];
    for (int j = 0; j < 16; ++j) {
      const float sc = std::clamp(std::nearbyint(sub_scale[j] * id), -128.0f, 127.0f);
      out.scales[j] = static_cast<int8_t>(sc);
      const float s = dq * sc;
      const float is = s != 0.0f ? 1.0f / s : 0.0f;
      for (int i = 0; i < 16; ++i) {
        const float v = std::clamp(std::nearbyint(xb[16 * j + i] * is), -32.0f, 31.0f);
        q[16 * j + i] = static_cast<uint8_t>(static_cast<int>(v) + 32);
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
