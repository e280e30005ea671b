// Q6_K: super-blocks of 256 weights in 16 sub-blocks of 16, each with an int8 scale; value =
// d * sc_j * (q - 32) with q in [0, 63]. Byte-identical to ggml's block_q6_K.
//
// Each half (128 weights) uses 64 bytes of ql and 32 of qh. For l in [0, 32), weights
//   l      = ql[l] low nibble      | (qh[l] bits 0-1) << 4
//   l + 32 = ql[l + 32] low nibble | (qh[l] bits 2-3) << 4
//   l + 64 = ql[l] high nibble     | (qh[l] bits 4-5) << 4
//   l + 96 = ql[l + 32] high nibble| (qh[l] bits 6-7) << 4
// and weight i of the half belongs to sub-block 8 * half + i / 16.
#pragma once

#include <cstdint>

#include "quant/q8_k.h"  // BlockQ8_K, kQK_K

namespace fak {

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;  // f16
};
static_assert(sizeof(BlockQ6_K) == 210, "block_q6_K is 210 bytes in GGUF");

// Unpacks the 256 6-bit quants (0..63) of one super-block in element order.
void UnpackQ6_K(const BlockQ6_K& b, uint8_t* q);

// n must be a multiple of 256.
void QuantizeRowQ6_K(const float* x, BlockQ6_K* y, int64_t n);
void DequantizeRowQ6_K(const BlockQ6_K* x, float* y, int64_t n);

// Exact integer part of one super-block dot: sum_j sc_j * sum_i (q_i - 32) a_i.
int32_t BlockDotQ6_KQ8_K(const BlockQ6_K& w, const BlockQ8_K& a);

// Reference dot; super-blocks in order, acc = acc + (d_a * d) * float(sum), no fused multiply-add.
float VecDotQ6_KQ8_K(int64_t n, const BlockQ6_K* w, const BlockQ8_K* a);

}  // namespace fak
