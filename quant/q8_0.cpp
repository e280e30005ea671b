#include "quant/q8_0.h"

#include <cmath>

#include "quant/f16.h"  // Fp16ToFp32, Fp32ToFp16

namespace fak {

namespace {

template <bool kTiesAway>
void Quantize(const float* x, BlockQ8_0* y, int64_t n) {
  const int64_t nb = n / kQK8_0;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQK8_0;
    float amax = 0.0f;
    for (int i = 0; i < kQK8_0; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = Fp32ToFp16(d);
    for (int i = 0; i < kQK8_0; ++i) {
      float q = kTiesAway ? std::round(xb[i] * id) : std::nearbyint(xb[i] * id);
      q = std::fmin(127.0f, std::fmax(-127.0f, q));
      y[b].qs[i] = static_cast<int8_t>(q);
    }
  }
}

}  // namespace

void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n) { Quantize<false>(x, y, n); }
void QuantizeWeightsQ8_0(const float* x, BlockQ8_0* y, int64_t n) { Quantize<true>(x, y, n); }

void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, int64_t n) {
  const int64_t nb = n / kQK8_0;
  for (int64_t b = 0; b < nb; ++b) {
    const float d = Fp16ToFp32(x[b].d);
    for (int i = 0; i < kQK8_0; ++i) y[b * kQK8_0 + i] = d * static_cast<float>(x[b].qs[i]);
  }
}

float VecDotQ8_0Q8_0(int64_t n, const BlockQ8_0* w, const BlockQ8_0* a) {
  const int64_t nb = n / kQK8_0;
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const float s = Fp16ToFp32(w[b].d) * Fp16ToFp32(a[b].d);
    acc = acc + s * static_cast<float>(BlockDotQ8_0(w[b], a[b]));
  }
  return acc;
}

}  // namespace fak
