// The packed ("row-interleaved") weight layout: one copy of a Q8_0 or Q4_K matrix that both the
// decode (matrix-vector) and prefill (matrix-matrix) kernels read with one SIMD lane per weight row,
// so no horizontal sums are needed and every row still accumulates its blocks in the reference order.
//
// Rows are taken in groups of kPackRows = 16 (the last group is padded with zero rows). A group is
// group_bytes = RoundUp(16 * row_bytes, 64) bytes, groups follow each other, so the whole matrix is one
// sequential stream. Inside a group ("dword" = 4 consecutive bytes of one row):
//
//   q8_0, nb = cols / 32 blocks, in pairs of blocks (2b, 2b + 1), 1088 B per pair, so one stream of
//   aligned 64-byte lines carries both quants and scales:
//     quants  2 x 512 B:  block, then k = 0..7, then row r: dword k of row r's block,
//                         each byte stored as q + 128 (u8), which vpdpbusd-style u8 x s8 dots need
//     scales  2 x 32 B:   block, then row r: the block's f16 d
//   (with nb odd the last block stands alone: 512 B quants, 32 B scales).
//   Each k-quant super-block is laid out in the order the kernels read it, so the stream only moves
//   forward (the hardware prefetchers follow it).
//   q4_k, nb = cols / 256 super-blocks, 2304 B each (144 B per row, as in GGUF):
//     d       32 B:       row r: f16 d          dmin 32 B: row r: f16 dmin
//     scales  192 B:      word w = 0..2, row r: dword w of row r's 12 scale bytes
//     qs      2048 B:     chunk c = 0..3, k = 0..7, row r: dword k of row r's qs[32c .. 32c + 32)
//   q6_k, nb = cols / 256 super-blocks, 3360 B each (210 B per row, as in GGUF), with q_i the 6-bit
//   quants in element order; for p = 0..15 the groups (4 elements) p, 16 + p, 32 + p, 48 + p are read
//   together:
//     scales  256 B:      word w = 0..3, row r: row r's int8 scales[4w .. 4w + 4)
//     quants  16 x 192 B: for p: three 64 B sets of one dword per row, byte e of
//                           f1 = q[4p+e]      | (q[128+4p+e] >> 4) << 6
//                           f2 = q[64+4p+e]   | (q[192+4p+e] >> 4) << 6
//                           nb = (q[128+4p+e] & 15) | (q[192+4p+e] & 15) << 4
//     d       32 B:       row r: f16 d
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

// Byte offsets inside one packed k-quant super-block of 16 rows.
constexpr int kQ4_KPackD = 0, kQ4_KPackDmin = 32, kQ4_KPackScales = 64, kQ4_KPackQs = 256,
              kQ4_KPackBytes = 2304;
constexpr int kQ6_KPackScales = 0, kQ6_KPackQuants = 256, kQ6_KPackD = 3328, kQ6_KPackBytes = 3360;

// True for the types that have a packed layout (q8_0, q4_k, q6_k).
bool HasPackedLayout(GgmlType type);
// Bytes of the packed copy of a (rows, cols) matrix; 0 when the type has no packed layout or cols is not
// a whole number of its blocks.
size_t PackedBytes(GgmlType type, int64_t rows, int64_t cols);
// Bytes of one packed group of 16 rows.
size_t PackedGroupBytes(GgmlType type, int64_t cols);
// Offsets of q8_0 block b's quants and scales inside a group of nb blocks.
size_t PackedQ8_0QuantOffset(int64_t b);
size_t PackedQ8_0ScaleOffset(int64_t nb, int64_t b);
// Writes the packed copy of `gguf_rows` ((rows, cols) in GGUF block layout, rows back to back) into
// `out`, which must hold PackedBytes bytes. Any alignment works; 64 bytes is what the kernels prefer.
Status PackMatrix(GgmlType type, const void* gguf_rows, int64_t rows, int64_t cols, void* out);
// True when the kernel table in use has native packed kernels for the type, i.e. packing pays off.
bool PreferPackedLayout(GgmlType type);

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

// The packed q6_k kernels read plain BlockQ8_K activation blocks, block-major.

// Bytes of packed activations for n_tokens rows of n elements.
size_t PackedActivationBytes(GgmlType type, int64_t n, int64_t n_tokens);
// Quantizes activation row t (of n elements) into the block-major buffer `out` of n_tokens rows. The
// quants are exactly those of QuantizeActivations.
void QuantizePackedActivations(GgmlType type, const float* x, int64_t n, int64_t t, int64_t n_tokens,
                               void* out);
// Converts n_tokens activation rows made by QuantizeActivations (stride bytes apart) into the packed
// block-major form.
void PackActivations(GgmlType type, const uint8_t* rows, size_t stride, int64_t n, int64_t n_tokens,
                     void* out);

}  // namespace fak::cpu
