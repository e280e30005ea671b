#include "backends/cpu/matmul.h"

#include <algorithm>
#include <array>

#include "backends/cpu/packed.h"  // PackedActivationBytes, QuantizePackedActivations
#include "core/timer.h"           // NowNanos

namespace fak::cpu {

Result<QuantMatrix> MakeQuantMatrix(GgmlType type, const void* data, int64_t rows, int64_t cols) {
  if (!HasKernels(type)) {
    return Unsupported("no CPU matmul kernels for weights of type {}", GgmlTypeName(type));
  }
  if (rows <= 0 || cols <= 0) return InvalidArgument("matrix shape ({}, {}) is empty", rows, cols);
  const auto row_bytes = GgmlRowBytes(type, static_cast<uint64_t>(cols));
  if (!row_bytes) {
    return InvalidArgument("{} rows of {} elements are not a whole number of blocks", GgmlTypeName(type),
                           cols);
  }
  if (data == nullptr) return InvalidArgument("matrix data is null");
  QuantMatrix m;
  m.type = type;
  m.data = static_cast<const uint8_t*>(data);
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = *row_bytes;
  return m;
}

Result<QuantMatrix> MakePackedQuantMatrix(GgmlType type, const void* data, int64_t rows, int64_t cols) {
  FAK_ASSIGN_OR_RETURN(QuantMatrix m, MakeQuantMatrix(type, data, rows, cols));
  if (!HasPackedLayout(m.type)) {
    return Unsupported("weights of type {} have no packed layout", GgmlTypeName(type));
  }
  m.packed = true;
  return m;
}

namespace {

// Grows a reused scratch buffer, never shrinks it: shrinking and growing again would zero-fill the
// regrown part on every call (a 2 MB memset per down projection of a 256-token prompt, on one thread).
void GrowTo(std::vector<uint8_t>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// The packed kernels take block-major activations; quantized once per call into a reused buffer, in
// chunks of `chunk` tokens: chunk c holds tokens [c * chunk, ...) block-major by themselves, at c *
// PackedActivationBytes(type, cols, chunk).
const uint8_t* QuantizeForPacked(const QuantMatrix& w, const float* x, int64_t n_tokens, int64_t chunk,
                                 ThreadPool& pool, const KernelTable& k, int64_t* quantize_ns) {
  const int64_t start = quantize_ns != nullptr ? NowNanos() : 0;
  static thread_local std::vector<uint8_t> buffer;
  std::vector<uint8_t>& act = buffer;
  const int64_t n_chunks = (n_tokens + chunk - 1) / chunk;
  const size_t chunk_bytes = PackedActivationBytes(w.type, w.cols, chunk);
  GrowTo(act, chunk_bytes * static_cast<size_t>(n_chunks) + 64);
  uint8_t* a = act.data();
  const QuantizePackedFn quantize = k.quantize_packed[KernelSlot(w.type)];
  pool.ParallelFor(n_tokens, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t c = t / chunk, len = std::min(chunk, n_tokens - c * chunk);
      quantize(x + t * w.cols, w.cols, t - c * chunk, len, a + static_cast<size_t>(c) * chunk_bytes);
    }
  });
  if (quantize_ns != nullptr) *quantize_ns += NowNanos() - start;
  return a;
}

// Tokens per chunk of a packed product. Every 16-row group reads the chunk's quantized activations
// again, from the core's L2 when they fit. Activations of up to kWholeBytes stay whole; larger ones go
// in chunks of at most kChunkBytes. On a Xeon with 2 MB of L2 per core (docs/bench/cpu-scaling.md) a
// 256-token prompt's down projection (8960 columns, 2.6 MB of activations) ran 7-9% faster in 48-token
// chunks than whole, while cutting 0.44 MB (1536 columns) or 0.66 MB (2048) of activations into
// chunks made those products 2-4% slower.
constexpr int64_t kWholeBytes = 1 << 20, kChunkBytes = 512 << 10;
int64_t TokenChunk(const QuantMatrix& w, int64_t n_tokens) {
  const auto per_token = static_cast<int64_t>(PackedActivationBytes(w.type, w.cols, 1));
  if (per_token <= 0 || per_token * n_tokens <= kWholeBytes) return n_tokens;
  return std::min(n_tokens, std::max<int64_t>(16, kChunkBytes / per_token / 16 * 16));
}

// A packed product's work: quantizes x in chunks (TokenChunk) and calls fn(act, t0, len, r0, r1) for
// every (chunk of tokens [t0, t0 + len), 16-row group) item, act being that chunk's activations. Items
// go chunk-major and are claimed dynamically in runs of consecutive groups, so a thread's consecutive
// items share their activations.
template <typename Fn>
Status ForEachPackedItem(const QuantMatrix& w, const float* x, int64_t n_tokens, ThreadPool& pool,
                         const KernelTable& k, int64_t* quantize_ns, Fn&& fn) {
  if (k.packed[KernelSlot(w.type)] == nullptr) {
    return Internal("matmul: no packed kernel for {}", GgmlTypeName(w.type));
  }
  const int64_t chunk = TokenChunk(w, n_tokens);
  const uint8_t* a = QuantizeForPacked(w, x, n_tokens, chunk, pool, k, quantize_ns);
  const size_t chunk_bytes = PackedActivationBytes(w.type, w.cols, chunk);
  const int64_t n_chunks = (n_tokens + chunk - 1) / chunk;
  const int64_t groups = (w.rows + kPackRows - 1) / kPackRows;
  pool.ParallelForDynamic(n_chunks * groups, 1, [&](int64_t i0, int64_t i1) {
    while (i0 < i1) {
      const int64_t c = i0 / groups, g0 = i0 % groups, g1 = std::min(groups, g0 + (i1 - i0));
      fn(a + static_cast<size_t>(c) * chunk_bytes, c * chunk, std::min(chunk, n_tokens - c * chunk),
         g0 * kPackRows, std::min(w.rows, g1 * kPackRows));
      i0 += g1 - g0;
    }
  });
  return Status::Ok();
}

Status MatMulPacked(const QuantMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
                    const KernelTable& k, int64_t* quantize_ns) {
  const PackedMatMulFn kernel = k.packed[KernelSlot(w.type)];
  return ForEachPackedItem(w, x, n_tokens, pool, k, quantize_ns,
                           [&](const uint8_t* act, int64_t t0, int64_t len, int64_t r0, int64_t r1) {
                             kernel(w.data, w.cols, act, len, y + t0 * w.rows, w.rows, r0, r1);
                           });
}

// Prefill on GGUF-layout weights: with this many tokens or more, each 16-row group is packed into a
// per-thread scratch just before use (a few percent of the multiply for q8_0 and q4_k) so the packed
// kernels run on it. The bits are the same either way; decode gains nothing from it.
constexpr int64_t kPackOnTheFlyTokens = 16;

Status MatMulPackingOnTheFly(const QuantMatrix& w, const float* x, int64_t n_tokens, float* y,
                             ThreadPool& pool, const KernelTable& k, int64_t* quantize_ns) {
  const int f = KernelSlot(w.type);
  const uint8_t* a = QuantizeForPacked(w, x, n_tokens, n_tokens, pool, k, quantize_ns);
  const size_t group_bytes = PackedGroupBytes(w.type, w.cols);
  bool ok = true;
  pool.ParallelForDynamic(w.rows, kPackRows, [&](int64_t r0, int64_t r1) {
    static thread_local std::vector<uint8_t> scratch;  // one packed group
    GrowTo(scratch, group_bytes);
    for (int64_t r = r0; r < r1; r += kPackRows) {
      const int64_t valid = r1 - r < kPackRows ? r1 - r : kPackRows;
      if (!PackMatrix(w.type, w.data + r * w.row_bytes, valid, w.cols, scratch.data()).ok()) {
        ok = false;  // cannot happen for a matrix MakeQuantMatrix accepted
        return;
      }
      k.packed[f](scratch.data(), w.cols, a, n_tokens, y + r, w.rows, 0, valid);
    }
  });
  return ok ? Status::Ok() : Internal("matmul: packing {} rows failed", GgmlTypeName(w.type));
}

}  // namespace

Status MatMul(const QuantMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
              const KernelTable* table, int64_t* quantize_ns) {
  if (n_tokens <= 0) return InvalidArgument("matmul: n_tokens is {}", n_tokens);
  if (w.data == nullptr || x == nullptr || y == nullptr) return InvalidArgument("matmul: null buffer");
  const KernelTable& k = table != nullptr ? *table : Kernels();
  if (w.packed) return MatMulPacked(w, x, n_tokens, y, pool, k, quantize_ns);
  const int f = KernelSlot(w.type);
  if (n_tokens >= kPackOnTheFlyTokens && HasPackedLayout(w.type) && k.packed_native[f]) {
    return MatMulPackingOnTheFly(w, x, n_tokens, y, pool, k, quantize_ns);
  }
  const size_t act_stride = ActivationRowBytes(w.type, w.cols);
  // (n_tokens, act_stride) bytes of activation blocks, quantized once and shared by every row.
  static thread_local std::vector<uint8_t> buffer;
  std::vector<uint8_t>& act = buffer;  // the caller's buffer, also inside the workers' lambdas
  GrowTo(act, act_stride * static_cast<size_t>(n_tokens) + 64);
  pool.ParallelFor(n_tokens, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      QuantizeActivations(w.type, x + t * w.cols, act.data() + t * act_stride, w.cols);
    }
  });
  // Rows are split in multiples of 16 so every thread runs whole register tiles.
  if (n_tokens == 1) {
    pool.ParallelForDynamic(w.rows, 16, [&](int64_t r0, int64_t r1) {
      k.matvec[f](w.data, w.row_bytes, w.cols, act.data(), y, r0, r1);
    });
  } else {
    pool.ParallelForDynamic(w.rows, 16, [&](int64_t r0, int64_t r1) {
      k.matmul[f](w.data, w.row_bytes, w.cols, act.data(), act_stride, n_tokens, y, w.rows, r0, r1);
    });
  }
  return Status::Ok();
}

Status MatMulMany(std::span<const QuantMatrix* const> all_w, const float* x, int64_t n_tokens,
                  std::span<float* const> all_y, ThreadPool& pool, const KernelTable* table,
                  int64_t* quantize_ns) {
  if (all_w.size() != all_y.size()) {
    return InvalidArgument("matmul: {} matrices for {} outputs", all_w.size(), all_y.size());
  }
  const KernelTable& k = table != nullptr ? *table : Kernels();
  // The products fused: packed matrices of the first one's cols with kernels for their type (at most
  // kMax), whose activations stay whole (TokenChunk: a prompt's 1536-column q, k and v do); the rest go
  // through MatMul one by one.
  constexpr size_t kMax = 8;
  std::array<const QuantMatrix*, kMax> w{};
  std::array<float*, kMax> y{};
  std::array<size_t, kMax> at{};  // w[j] is all_w[at[j]]
  size_t n = 0;
  for (size_t i = 0; i < all_w.size(); ++i) {
    const QuantMatrix* m = all_w[i];
    const bool fusable = n_tokens >= 1 && x != nullptr && m != nullptr && m->packed && m->data != nullptr &&
                         all_y[i] != nullptr && n < kMax && (n == 0 || m->cols == w[0]->cols) &&
                         k.packed[KernelSlot(m->type)] != nullptr &&
                         k.quantize_packed[KernelSlot(m->type)] != nullptr &&
                         TokenChunk(*m, n_tokens) == n_tokens;
    if (fusable) {
      w[n] = m;
      y[n] = all_y[i];
      at[n++] = i;
    }
  }
  if (n == 1) n = 0;                                  // nothing to share
  for (size_t i = 0, j = 0; i < all_w.size(); ++i) {  // the others (at[] is increasing)
    if (j < n && at[j] == i) {
      ++j;
      continue;
    }
    if (all_w[i] == nullptr) return InvalidArgument("matmul: matrix {} is null", i);
    FAK_RETURN_IF_ERROR(MatMul(*all_w[i], x, n_tokens, all_y[i], pool, table, quantize_ns));
  }
  if (n == 0) return Status::Ok();
  // The activations once for each weight type among the matrices (QuantizeForPacked's blocks, as one
  // chunk of all the tokens): on this thread for one token (a few hundred values), else across the pool
  // in one call for every type.
  const int64_t start = quantize_ns != nullptr ? NowNanos() : 0;
  const int64_t cols = w[0]->cols;
  static thread_local std::vector<uint8_t> buffer;
  std::array<size_t, kMax> act_at{};
  std::array<size_t, kMax> owners{};  // the first matrix of each type: it quantizes for the others
  size_t n_owners = 0, bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    size_t j = 0;
    while (j < i && w[j]->type != w[i]->type) ++j;
    act_at[i] = j == i ? bytes : act_at[j];
    if (j == i) {
      owners[n_owners++] = i;
      bytes += (PackedActivationBytes(w[i]->type, cols, n_tokens) + 63) / 64 * 64;
    }
  }
  GrowTo(buffer, bytes + 64);
  uint8_t* act = buffer.data();
  auto quantize = [&](int64_t t0, int64_t t1) {
    for (size_t o = 0; o < n_owners; ++o) {
      const size_t i = owners[o];
      const QuantizePackedFn q = k.quantize_packed[KernelSlot(w[i]->type)];
      for (int64_t t = t0; t < t1; ++t) q(x + t * cols, cols, t, n_tokens, act + act_at[i]);
    }
  };
  if (n_tokens == 1) {
    quantize(0, 1);
  } else {
    pool.ParallelFor(n_tokens, 1, quantize);
  }
  if (quantize_ns != nullptr) *quantize_ns += NowNanos() - start;
  // The matrices' groups in order, claimed as ForEachPackedItem claims one matrix's.
  std::array<int64_t, kMax + 1> first{};  // first[i]: the index of matrix i's first group
  for (size_t i = 0; i < n; ++i) first[i + 1] = first[i] + (w[i]->rows + kPackRows - 1) / kPackRows;
  pool.ParallelForDynamic(first[n], 1, [&](int64_t i0, int64_t i1) {
    size_t m = 0;
    while (i0 < i1) {
      while (first[m + 1] <= i0) ++m;
      const QuantMatrix& wm = *w[m];
      const int64_t g0 = i0 - first[m], g1 = std::min(i1, first[m + 1]) - first[m];
      k.packed[KernelSlot(wm.type)](wm.data, wm.cols, act + act_at[m], n_tokens, y[m], wm.rows,
                                    g0 * kPackRows, std::min(wm.rows, g1 * kPackRows));
      i0 = first[m] + g1;
    }
  });
  return Status::Ok();
}

bool CanFuseSwiGLU(const QuantMatrix& gate, const QuantMatrix& up) {
  return gate.packed && up.packed && gate.type == up.type && gate.rows == up.rows && gate.cols == up.cols;
}

Status MatMulSwiGLU(const QuantMatrix& gate, const QuantMatrix& up, const float* x, int64_t n_tokens,
                    float* g, float* u, ThreadPool& pool, const KernelTable* table, int64_t* quantize_ns) {
  if (n_tokens <= 0) return InvalidArgument("matmul: n_tokens is {}", n_tokens);
  if (gate.data == nullptr || up.data == nullptr || x == nullptr || g == nullptr || u == nullptr) {
    return InvalidArgument("matmul: null buffer");
  }
  if (!CanFuseSwiGLU(gate, up)) {
    return InvalidArgument(
        "swiglu: gate ({}, {} x {}) and up ({}, {} x {}) are not packed matrices of one "
        "type and shape",
        GgmlTypeName(gate.type), gate.rows, gate.cols, GgmlTypeName(up.type), up.rows, up.cols);
  }
  const KernelTable& k = table != nullptr ? *table : Kernels();
  const PackedMatMulFn kernel = k.packed[KernelSlot(gate.type)];
  const int64_t rows = gate.rows;
  return ForEachPackedItem(gate, x, n_tokens, pool, k, quantize_ns,
                           [&](const uint8_t* act, int64_t t0, int64_t len, int64_t r0, int64_t r1) {
                             float* gc = g + t0 * rows;
                             float* uc = u + t0 * rows;
                             kernel(gate.data, gate.cols, act, len, gc, rows, r0, r1);
                             kernel(up.data, up.cols, act, len, uc, rows, r0, r1);
                             for (int64_t t = 0; t < len; ++t) {
                               k.silu_mul(gc + t * rows + r0, uc + t * rows + r0, r1 - r0);
                             }
                           });
}

}  // namespace fak::cpu
