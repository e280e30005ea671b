// Q8_0: blocks of 32 weights, one f16 scale and 32 int8 quants; value = d * q. Byte-identical to
// ggml's block_q8_0. Also the activation format for Q8_0 weight dot products.
#pragma once

#include <cstdint>

namespace fak {

constexpr int kQK8_0 = 32;

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "block_q8_0 is 34 bytes in GGUF");

// n must be a multiple of 32. Quants stay in [-127, 127]: d = max|x| / 127, q = round(x * (1 / d)).
// Activations round ties to even (as llama.cpp's SIMD activation quantizers do, and fak's packed
// kernels reproduce); weights round ties away from zero, as llama.cpp's reference quantizer does, so
// that `fak quantize` writes the same bytes as llama-quantize.
void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n);
void QuantizeWeightsQ8_0(const float* x, BlockQ8_0* y, int64_t n);
void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, int64_t n);

// Exact integer dot of one block's quants: sum of w.qs[i] * a.qs[i].
inline int32_t BlockDotQ8_0(const BlockQ8_0& w, const BlockQ8_0& a) {
  int32_t s = 0;
  for (int i = 0; i < kQK8_0; ++i) s += static_cast<int32_t>(w.qs[i]) * a.qs[i];
  return s;
}

// Reference dot; the contract SIMD kernels reproduce bit for bit: blocks are taken in order and
// acc = acc + (d_w * d_a) * float(isum_b), each operation rounded to f32 (no fused multiply-add).
float VecDotQ8_0Q8_0(int64_t n, const BlockQ8_0* w, const BlockQ8_0* a);

}  // namespace fak
