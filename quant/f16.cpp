#include "quant/f16.h"

namespace fak {

uint16_t Fp32ToFp16(float f) {
  const uint32_t u = FloatToBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00 | static_cast<uint16_t>((abs >> 13) & 0x3FF);  // nan
  if (abs >= 0x477FF000u) return sign | 0x7C00;  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): mantissa = round(|f| * 2^24).
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - exp;  // 14..24 -> value = mant >> (shift) with rounding
    const uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    uint32_t r = q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0);
    return sign | static_cast<uint16_t>(r);
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  uint32_t v = abs - (112u << 23);
  v += 0xFFF + ((v >> 13) & 1);
  return sign | static_cast<uint16_t>(v >> 13);
}

void QuantizeRowF16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Fp32ToFp16(x[i]);
}
void DequantizeRowF16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Fp16ToFp32(x[i]);
}
void QuantizeRowBf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Fp32ToBf16(x[i]);
}
void DequantizeRowBf16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Bf16ToFp32(x[i]);
}

namespace {
template <float (*kToF32)(uint16_t)>
float VecDotHalf(int64_t n, const uint16_t* w, const float* x) {
  float lane[16] = {};
  for (int64_t i = 0; i < n; ++i) {
    const float p = kToF32(w[i]) * x[i];
    lane[i & 15] = lane[i & 15] + p;
  }
  return ReduceLanes16(lane);
}
}  // namespace

float VecDotF16F32(int64_t n, const uint16_t* w, const float* x) { return VecDotHalf<Fp16ToFp32>(n, w, x); }
float VecDotF32F32(int64_t n, const float* w, const float* x) {
  float lane[16] = {};
  for (int64_t i = 0; i < n; ++i) {
    const float p = w[i] * x[i];
    lane[i & 15] = lane[i & 15] + p;
  }
  return ReduceLanes16(lane);
}
float VecDotBf16F32(int64_t n, const uint16_t* w, const float* x) { return VecDotHalf<Bf16ToFp32>(n, w, x); }

}  // namespace fak
