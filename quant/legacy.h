// llama.cpp's older 32-element block formats, read so that files llama-quantize writes load: Q4_0,
// Q4_1, Q5_0 and Q5_1 (llama-quantize's Q4_K_M falls back to Q5_0 for rows that are not a multiple of
// 256 wide). fak has no kernels for them: the loader converts them at load (to f32 by default, which
// is exact, or to the --quant format). Byte-identical to ggml's blocks; all little-endian.
//
//   q4_0 (18 B): f16 d, qs[16];          x[i] = d * ((qs[i] & 15) - 8), x[i + 16] = d * ((qs[i] >> 4) - 8)
//   q4_1 (20 B): f16 d, f16 m, qs[16];   x[i] = d * (qs[i] & 15) + m,   x[i + 16] = d * (qs[i] >> 4) + m
//   q5_0 (22 B): f16 d, u32 qh, qs[16];  the low nibbles as in q4_0, with bit i (for x[i]) or bit
//                                        i + 16 (for x[i + 16]) of qh as the fifth bit, then minus 16
//   q5_1 (24 B): f16 d, f16 m, u32 qh, qs[16]; the same five-bit values times d plus m
#pragma once

#include <cstdint>

namespace fak {

// n must be a multiple of 32; blocks are read byte by byte (no alignment needed).
void DequantizeRowQ4_0(const uint8_t* x, float* y, int64_t n);
void DequantizeRowQ4_1(const uint8_t* x, float* y, int64_t n);
void DequantizeRowQ5_0(const uint8_t* x, float* y, int64_t n);
void DequantizeRowQ5_1(const uint8_t* x, float* y, int64_t n);

}  // namespace fak
