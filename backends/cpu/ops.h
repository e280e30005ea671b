// Model-agnostic CPU ops over f32 activations. Row-wise ops reduce each row in a fixed order, so a
// row's result never depends on how many rows are computed together (batch invariance).
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "ops/weight.h"

namespace fak::cpu {

// y = x / rms(x) * w over each of n_rows rows of n elements (in place allowed).
void RmsNorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps);
// x[r] += b for each row.
void AddBias(float* x, const float* b, int64_t n_rows, int64_t n);
// Rotates the first rot_dim dims of each head of one token at position pos.
// neox: pairs (i, i + rot_dim/2); otherwise interleaved pairs (2i, 2i+1).
void Rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos, const float* inv_freq,
          bool neox, float attn_factor);
// g = silu(g) * u.
void SiluMul(float* g, const float* u, int64_t n);
// out = row `id` of an embedding matrix in any supported type, as f32. With `as_type` other than the
// table's own, the row is quantized to as_type and back first: a lookup in a higher-precision copy
// (the source file) then gives exactly the values of a table converted to as_type.
Status EmbeddingRow(const Weight& table, int64_t id, float* out, GgmlType as_type);

// f16 <-> f32 for the KV cache.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);

}  // namespace fak::cpu
