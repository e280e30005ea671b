// Q4_K: super-blocks of 256 weights in 8 sub-blocks of 32. Each sub-block j has a 6-bit scale sc_j and
// a 6-bit minimum m_j; value = d * sc_j * q - dmin * m_j with q in [0, 15]. Byte-identical to ggml's
// block_q4_K.
//
// scales[12] packs the 8 (sc, m) pairs: for j < 4, sc_j = scales[j] & 63 and m_j = scales[j + 4] & 63;
// for j >= 4, sc_j = (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4 and
// m_j = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4.
// qs[128] holds 4 chunks of 64 weights in 32 bytes each: the low nibbles are sub-block 2c, the high
// nibbles sub-block 2c + 1.
#pragma once

#include <cstdint>

#include "quant/q8_k.h"  // BlockQ8_K, kQK_K

namespace fak {

struct BlockQ4_K {
  uint16_t d;     // f16 super-block scale for the sub-block scales
  uint16_t dmin;  // f16 super-block scale for the sub-block minimums
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "block_q4_K is 144 bytes in GGUF");

// Unpacks sub-block j's 6-bit scale and minimum.
inline void Q4_KScaleMin(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// n must be a multiple of 256.
void QuantizeRowQ4_K(const float* x, BlockQ4_K* y, int64_t n);
void DequantizeRowQ4_K(const BlockQ4_K* x, float* y, int64_t n);

// Exact integer parts of one super-block dot: *sum = sum_j sc_j * sum_i q_i a_i and
// *min_sum = sum_j m_j * (bsums of sub-block j).
void BlockDotQ4_KQ8_K(const BlockQ4_K& w, const BlockQ8_K& a, int32_t* sum, int32_t* min_sum);

// Reference dot; super-blocks in order,
// acc = acc + ((d_a * d) * float(sum) - (d_a * dmin) * float(min_sum)), no fused multiply-add.
float VecDotQ4_KQ8_K(int64_t n, const BlockQ4_K* w, const BlockQ8_K* a);

}  // namespace fak
