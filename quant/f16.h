// F16 (IEEE binary16) and BF16 (bfloat16) scalars and rows. Conversions are exact in the f16 -> f32
// direction and round to nearest even in the f32 -> f16 direction, NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>

namespace fak {

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t FloatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) return BitsToFloat(sign | 0x7F800000u | (mant << 13));  // inf / nan
  if (exp != 0) return BitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return BitsToFloat(sign);
  // Subnormal: value = mant * 2^-24, normalise it.
  int e = -1;
  do {
    mant <<= 1;
    ++e;
  } while ((mant & 0x400) == 0);
  return BitsToFloat(sign | static_cast<uint32_t>(112 - e) << 23 | ((mant & 0x3FF) << 13));
}

uint16_t Fp32ToFp16(float f);

// bfloat16 is the upper half of a binary32.
inline float Bf16ToFp32(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }
inline uint16_t Fp32ToBf16(float f) {
  uint32_t u = FloatToBits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet nan
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

void QuantizeRowF16(const float* x, uint16_t* y, int64_t n);
void DequantizeRowF16(const uint16_t* x, float* y, int64_t n);
void QuantizeRowBf16(const float* x, uint16_t* y, int64_t n);
void DequantizeRowBf16(const uint16_t* x, float* y, int64_t n);

// Reference dot of an f16/bf16 weight row with f32 activations. The order of float operations is part
// of the contract that SIMD kernels reproduce bit for bit: 16 lane sums, lane = i mod 16, each
// lane[i%16] += w[i] * x[i] (a multiply, then an add: no fused multiply-add), then ReduceLanes16.
float VecDotF16F32(int64_t n, const uint16_t* w, const float* x);
float VecDotBf16F32(int64_t n, const uint16_t* w, const float* x);
// The same order for f32 weights.
float VecDotF32F32(int64_t n, const float* w, const float* x);

// The fixed reduction tree: halves are added (i + i+8, then i + i+4, i + i+2, i + i+1).
inline float ReduceLanes16(const float* l) {
  float a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) a[i] = l[i] + l[i + 8];
  for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
  for (int i = 0; i < 2; ++i) c[i] = b[i] + b[i + 2];
  return c[0] + c[1];
}

}  // namespace fak
