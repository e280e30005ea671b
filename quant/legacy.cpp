#include "quant/legacy.h"

#include "quant/f16.h"  // Fp16ToFp32

namespace fak {
namespace {

constexpr int kBlock = 32;

float Half(const uint8_t* p) { return Fp16ToFp32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }
uint32_t Word(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// The 32 integer levels of one block: the nibbles of qs, plus the fifth bits of qh when five-bit.
void Levels(const uint8_t* qs, uint32_t qh, bool five_bit, int offset, int* q) {
  for (int i = 0; i < 16; ++i) {
    int lo = qs[i] & 15, hi = qs[i] >> 4;
    if (five_bit) {
      lo |= static_cast<int>((qh >> i) & 1u) << 4;
      hi |= static_cast<int>((qh >> (i + 16)) & 1u) << 4;
    }
    q[i] = lo - offset;
    q[i + 16] = hi - offset;
  }
}

template <bool kMin, bool kFive>
void Dequantize(const uint8_t* x, float* y, int64_t n) {
  constexpr int kBytes = 2 + (kMin ? 2 : 0) + (kFive ? 4 : 0) + 16;
  constexpr int kOffset = kMin ? 0 : (kFive ? 16 : 8);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const uint8_t* p = x + b * kBytes;
    const float d = Half(p);
    const float m = kMin ? Half(p + 2) : 0.0f;
    const uint32_t qh = kFive ? Word(p + (kMin ? 4 : 2)) : 0;
    int q[kBlock];
    Levels(p + kBytes - 16, qh, kFive, kOffset, q);
    float* out = y + b * kBlock;
    for (int i = 0; i < kBlock; ++i)
      out[i] = kMin ? d * static_cast<float>(q[i]) + m : d * static_cast<float>(q[i]);
  }
}

}  // namespace

void DequantizeRowQ4_0(const uint8_t* x, float* y, int64_t n) { Dequantize<false, false>(x, y, n); }
void DequantizeRowQ4_1(const uint8_t* x, float* y, int64_t n) { Dequantize<true, false>(x, y, n); }
void DequantizeRowQ5_0(const uint8_t* x, float* y, int64_t n) { Dequantize<false, true>(x, y, n); }
void DequantizeRowQ5_1(const uint8_t* x, float* y, int64_t n) { Dequantize<true, true>(x, y, n); }

}  // namespace fak
