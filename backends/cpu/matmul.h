// The CPU matmul op over quantized weights: y = x . W^T for a (rows, cols) weight matrix held in its
// GGUF block format and n_tokens activation rows. Activations are quantized once per row into the
// format's activation blocks; rows are split across the pool's threads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/cpu/kernels.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "quant/ggml_type.h"

namespace fak::cpu {

// A weight matrix in place: either GGUF rows of `cols` elements, row_bytes apart (typically inside a
// GGUF mapping), or, with `packed`, the row-interleaved copy of backends/cpu/packed.h (PackMatrix).
struct QuantMatrix {
  GgmlType type = GgmlType::kQ8_0;  // HasKernels(type)
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;  // bytes of one GGUF row, also for packed matrices
  bool packed = false;
};

// Checks the type has kernels and cols is a whole number of its blocks.
Result<QuantMatrix> MakeQuantMatrix(GgmlType type, const void* data, int64_t rows, int64_t cols);
// The same for a packed copy made by PackMatrix (q8_0, q4_k, q6_k); `data` holds PackedBytes bytes.
Result<QuantMatrix> MakePackedQuantMatrix(GgmlType type, const void* data, int64_t rows, int64_t cols);

// x: (n_tokens, w.cols) f32, y: (n_tokens, w.rows) f32. Uses Kernels() unless `table` is given. When
// `quantize_ns` is given, the nanoseconds spent quantizing the activations are added to it (profiling).
Status MatMul(const QuantMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
              const KernelTable* table = nullptr, int64_t* quantize_ns = nullptr);

// Several matrices of one input (a layer's q, k and v): y[i] (n_tokens, w[i].rows) = x . w[i]^T, the
// bits of MatMul on each. The packed matrices among them (of the first one's cols, with activations
// small enough to stay in one chunk) share one parallel call: the activations are quantized once per
// weight type and every matrix's 16-row groups go to the pool together (a decode step's small products
// are otherwise short streams, each behind a fork and a join of its own; a prompt's k and v have as
// few groups as a server CPU has threads); the others go through MatMul.
Status MatMulMany(std::span<const QuantMatrix* const> w, const float* x, int64_t n_tokens,
                  std::span<float* const> y, ThreadPool& pool, const KernelTable* table = nullptr,
                  int64_t* quantize_ns = nullptr);

// True when MatMulSwiGLU can fuse gate and up: both packed, of one type and shape.
bool CanFuseSwiGLU(const QuantMatrix& gate, const QuantMatrix& up);
// The first half of a SwiGLU feed-forward for CanFuseSwiGLU matrices: g = silu(x . gate^T) * (x . up^T)
// and u = x . up^T, the bits of MatMul(gate), MatMul(up) and table->silu_mul over the result. The
// activations are quantized once for both, and each piece of g is passed through silu_mul right after
// it is computed, while it is still in cache.
Status MatMulSwiGLU(const QuantMatrix& gate, const QuantMatrix& up, const float* x, int64_t n_tokens,
                    float* g, float* u, ThreadPool& pool, const KernelTable* table = nullptr,
                    int64_t* quantize_ns = nullptr);

}  // namespace fak::cpu
