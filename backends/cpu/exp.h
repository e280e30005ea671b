// exp(x) in f32 for the activation and softmax kernels, written so that the scalar form here and the
// SIMD forms (act_avx2.cpp, attention_avx2.cpp) perform the same IEEE operations in the same order:
// a lane of a vector kernel and the scalar tail after it give identical bits, so where a split falls
// never changes a result (batch invariance). Relative error about 2e-7 (Cephes' expf polynomial);
// inputs are clamped to [-87.33, 88.37], where the result stays a normal float.
//
//   n = round(x * log2(e))             (the 1.5 * 2^23 trick: round to nearest, ties to even)
//   r = x - n * ln2_hi - n * ln2_lo    (ln2 split so n * ln2_hi is exact)
//   exp(r) = 1 + r + r^2 * P(r)        (degree 5, Horner)
//   exp(x) = exp(r) * 2^n              (n added to the exponent field)
#pragma once

#include <cstdint>
#include <cstring>

namespace fak::cpu {

inline constexpr float kExpMin = -87.3365447f, kExpMax = 88.3762626f;
inline constexpr float kLog2e = 1.44269504f, kRound = 12582912.0f;
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
inline constexpr float kExpP0 = 1.9875691500e-4f, kExpP1 = 1.3981999507e-3f, kExpP2 = 8.3334519073e-3f,
                       kExpP3 = 4.1665795894e-2f, kExpP4 = 1.6666665459e-1f, kExpP5 = 5.0000001201e-1f;

inline float ExpFast(float x) {
  x = x < kExpMin ? kExpMin : x;
  x = x > kExpMax ? kExpMax : x;
  const float n = (x * kLog2e + kRound) - kRound;
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kExpP0;
  p = p * r + kExpP1;
  p = p * r + kExpP2;
  p = p * r + kExpP3;
  p = p * r + kExpP4;
  p = p * r + kExpP5;
  const float y = (p * r * r + r) + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return y * scale;
}

// g = silu(g) * u = g / (1 + exp(-g)) * u.
inline float SiluMulOne(float g, float u) { return g / (1.0f + ExpFast(-g)) * u; }

}  // namespace fak::cpu
