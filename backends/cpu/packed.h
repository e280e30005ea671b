// The packed ("row-interleaved") weight layout: one copy of a Q8_0 or Q4_K matrix that both the
// decode (matrix-vector) and prefill (matrix-matrix) kernels read with one SIMD lane per weight row,
// so no horizontal sums are needed and every row still accumulates its blocks in the reference order.
//
// Rows are taken in groups of kPackRows = 16 (the last group is padded with zero rows). A group is
// group_bytes = RoundUp(16 * row_bytes, 64) bytes, groups follow each other, so the whole matrix is one
// sequential stream. Inside a group ("dword" = 4 consecutive bytes of one row):
//
//   q8_0, nb = cols / 32 blocks:
//     quants  nb x 512 B: block b, then k = 0..7, then row r: dword k of row r's block b,
//                         each byte stored as q + 128 (u8), which vpdpbusd-style u8 x s8 dots need
//     scales  nb x 32 B:  block b, then row r: the block's f16 d
//   q4_k, nb = cols / 256 super-blocks, 2304 B each (144 B per row, as in GGUF):
//     qs      2048 B:     chunk c = 0..3, k = 0..7, row r: dword k of row r's qs[32c .. 32c + 32)
//     d       32 B:       row r: f16 d          dmin 32 B: row r: f16 dmin
//     scales  192 B:      word w = 0..2, row r: dword w of row r's 12 scale bytes
//
// The activations of the packed kernels are block-major, (blocks, n_tokens), so a tile of tokens
// reads one contiguous run per block; their blocks carry what the kernels would otherwise recompute.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/kernels.h"
#include "core/status.h"
#include "quant/ggml_type.h"

namespace fak::cpu {

constexpr int kPackRows = 16;

// True for the formats that have a packed layout (q8_0, q4_k).
bool HasPackedLayout(WeightFormat f);
// Bytes of the packed copy of a (rows, cols) matrix; 0 when f has no packed layout or cols is not a
// whole number of its blocks.
size_t PackedBytes(WeightFormat f, int64_t rows, int64_t cols);
// Bytes of one packed group of 16 rows.
size_t PackedGroupBytes(WeightFormat f, int64_t cols);
// Writes the packed copy of `gguf_rows` ((rows, cols) in GGUF block layout, rows back to back) into
// `out`, which must hold PackedBytes bytes. Any alignment works; 64 bytes is what the kernels prefer.
Status PackMatrix(GgmlType type, const void* gguf_rows, int64_t rows, int64_t cols, void* out);
// True when the kernel table in use has native packed kernels for f, i.e. packing pays off.
bool PreferPackedLayout(WeightFormat f);

// One activation block of the packed q8_0 kernels: the Q8_0 quants, the f32 value of its f16 scale and
// -128 * sum(qs), the exact correction for the +128 bias of the weight quants.
struct ActQ8_0 {
  int8_t qs[32];
  float d;
  int32_t corr;
};
static_assert(sizeof(ActQ8_0) == 40);

// One activation super-block of the packed q4_k kernels: the Q8_K quants and scale, and the 8 sums of
// 32 quants (bsums[2j] + bsums[2j + 1]) that the sub-block minimums multiply.
struct ActQ8_K {
  int8_t qs[256];
  int16_t bsum32[8];
  float d;
  int32_t pad[3];
};
static_assert(sizeof(ActQ8_K) == 288);

// Bytes of packed activations for n_tokens rows of n elements.
size_t PackedActivationBytes(WeightFormat f, int64_t n, int64_t n_tokens);
// Quantizes activation row t (of n elements) into the block-major buffer `out` of n_tokens rows. The
// quants are exactly those of QuantizeActivations.
void QuantizePackedActivations(WeightFormat f, const float* x, int64_t n, int64_t t, int64_t n_tokens, void* out);
// Converts n_tokens activation rows made by QuantizeActivations (stride bytes apart) into the packed
// block-major form.
void PackActivations(WeightFormat f, const uint8_t* rows, size_t stride, int64_t n, int64_t n_tokens, void* out);

}  // namespace fak::cpu
