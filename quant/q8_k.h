// Q8_K: the activation format for k-quant dot products. Super-blocks of 256 with an f32 scale,
// int8 quants and the sums of each 16 quants (bsums) so that k-quant minimums cost one multiply
// per sub-block. Byte-identical to ggml's block_q8_K.
#pragma once

#include <cstdint>

namespace fak {

constexpr int kQK_K = 256;

struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "block_q8_K is 292 bytes");

// n must be a multiple of 256. Quants stay in [-127, 127]: d = max|x| / 127.
void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n);
void DequantizeRowQ8_K(const BlockQ8_K* x, float* y, int64_t n);

}  // namespace fak
