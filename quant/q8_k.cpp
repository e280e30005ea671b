#include "quant/q8_k.h"

#include <cmath>

namespace fak {

void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQK_K;
    float amax = 0.0f;
    for (int i = 0; i < kQK_K; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = d;
    for (int i = 0; i < kQK_K; ++i) {
      float q = std::nearbyint(xb[i] * id);
      q = std::fmin(127.0f, std::fmax(-127.0f, q));
      y[b].qs[i] = static_cast<int8_t>(q);
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += y[b].qs[j * 16 + i];
      y[b].bsums[j] = static_cast<int16_t>(s);
    }
  }
}

void DequantizeRowQ8_K(const BlockQ8_K* x, float* y, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    for (int i = 0; i < kQK_K; ++i) y[b * kQK_K + i] = x[b].d * static_cast<float>(x[b].qs[i]);
  }
}

}  // namespace fak
