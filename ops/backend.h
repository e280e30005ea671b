// The backend seam (the HAL): what a forward pass asks of a device. CPU and CUDA implement it; an
// architecture's forward pass is written only as calls on it, so one decode step is a fixed sequence
// of queued operations that a GPU backend can capture once and replay.
//
// Calls that compute are queued: they return nothing, and the first failure among them is reported
// by the next Synchronize() (later calls of the same step are skipped). Shapes and weights are
// checked once, when weights are bound and buffers allocated; the queued calls trust them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "ops/weight.h"
#include "quant/ggml_type.h"

namespace fak {

// A (rows, cols) f32 activation matrix in the backend's memory, row-major. Only the backend reads
// or writes `data`; callers make views of it.
struct Tensor {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  // Rows [r0, r0 + n).
  Tensor Rows(int64_t r0, int64_t n) const { return {data + r0 * cols, n, cols}; }
  // The same elements as (rows * cols / c, c): a row of heads seen as one row per head.
  Tensor Reshaped(int64_t c) const { return {data, rows * cols / c, c}; }
};

// A weight bound to a backend; `id` indexes the backend's own table.
struct BoundWeight {
  int32_t id = -1;
  int64_t rows = 0;
  int64_t cols = 0;
  bool present() const { return id >= 0; }
};

// KV cache pages: a page holds `page_tokens` positions of every layer's keys and values.
struct KvGeometry {
  int64_t n_layer = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
  int64_t page_tokens = 16;
  bool f32 = false;  // keys and values in f32 instead of f16
};

// Rotary embedding of one model: the first rot_dim dims of each head rotate by position * inv_freq.
struct RopeSpec {
  std::vector<float> inv_freq;  // (rot_dim / 2)
  bool neox = true;             // pairs (i, i + rot_dim/2); otherwise (2i, 2i+1)
  float attn_factor = 1.0f;     // YaRN scales cos/sin by this
};

// One Gated-DeltaNet (linear attention) layer's geometry and where its state lives in a sequence's
// state slot: first the convolution's last conv_kernel - 1 inputs, (conv_kernel - 1, conv_dim) f32,
// then the recurrent state S, (n_v_head, k_dim, v_dim) f32. Value head h reads key head
// h % n_k_head (llama.cpp's tiled order for qwen35, into which HF checkpoints are reordered at load),
// or with `grouped` key head h / (n_v_head / n_k_head) (the order HF and llama.cpp's qwen3next keep).
struct DeltaNetSpec {
  int64_t n_k_head = 0;
  int64_t n_v_head = 0;
  int64_t k_dim = 0;
  int64_t v_dim = 0;
  int64_t conv_kernel = 0;
  size_t state_offset = 0;  // bytes into the slot
  float eps = 1e-6f;        // of the q/k L2 normalization
  bool grouped = false;

  // The key head value head h reads.
  int64_t KeyHead(int64_t h) const { return grouped ? h / (n_v_head / n_k_head) : h % n_k_head; }
  int64_t conv_dim() const { return 2 * n_k_head * k_dim + n_v_head * v_dim; }
  size_t ConvStateBytes() const { return static_cast<size_t>((conv_kernel - 1) * conv_dim()) * 4; }
  size_t StateBytes() const { return ConvStateBytes() + static_cast<size_t>(n_v_head * k_dim * v_dim) * 4; }
};

// A mixture-of-experts FFN (Qwen3.5-MoE, Qwen3-Next): per row, a router (n_expert, d) gives softmax weights
// over the experts; the n_used largest are kept (renormalised to sum 1 when norm_top_k) and each chosen
// expert's SwiGLU FFN runs on the row, scaled by its weight. A shared expert, where present, runs on every
// row, scaled by sigmoid(x . shared_scale). Each row's result is summed in a fixed order (experts by rank,
// then the shared expert), so it does not depend on the other rows of the batch.
struct MoeSpec {
  int64_t n_expert = 0;
  int64_t n_used = 0;
  bool norm_top_k = true;
  BoundWeight router;                               // (n_expert, d) MatMul-bound
  std::vector<BoundWeight> gate, up, down;          // each expert's (d_ff, d), (d_ff, d), (d, d_ff)
  BoundWeight shared_gate, shared_up, shared_down;  // absent: no shared expert
  BoundWeight shared_scale;                         // (1, d) vector; absent: the shared expert is unscaled
};

// One ragged batch as the ops see it: rows from many sequences, each a prefill chunk or a decode
// token. Row r is token tokens[r] at position positions[r] of sequence row_seq[r], whose KV page
// table is pages[page_begin[s] .. page_begin[s + 1]); it attends to positions [0, positions[r]].
struct BatchPlan {
  std::span<const int32_t> tokens;      // (n_rows)
  std::span<const int32_t> positions;   // (n_rows)
  std::span<const int32_t> row_seq;     // (n_rows)
  std::span<const int32_t> page_begin;  // (n_seqs + 1)
  std::span<const int32_t> pages;       // every sequence's page ids, concatenated
  std::span<const int32_t> out_rows;    // rows whose logits are wanted, ascending
  int64_t max_ctx = 0;                  // the largest positions[r] + 1
  std::span<const int32_t> state_slot;  // (n_seqs) each sequence's state slot; empty without states
};

// How a backend wants weight matrices laid out; the loader converts rows into it as it streams.
class WeightLayout {
 public:
  virtual ~WeightLayout() = default;
  // True when matrices of this type and row length are stored in the backend's own layout rather
  // than as GGUF rows.
  virtual bool Repacks(GgmlType type, int64_t cols) const = 0;
  // Bytes of a (rows, cols) matrix in that layout.
  virtual size_t Bytes(GgmlType type, int64_t rows, int64_t cols) const = 0;
  // Rows converted together, and the bytes one such group takes.
  virtual int64_t GroupRows() const = 0;
  virtual size_t GroupBytes(GgmlType type, int64_t cols) const = 0;
  // Converts n (<= GroupRows) GGUF rows into one group.
  virtual Status Convert(GgmlType type, const uint8_t* rows, int64_t n, int64_t cols,
                         uint8_t* group) const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Worker threads (CPU) or 0.
  virtual int threads() const = 0;
  // Rows per forward pass that a long prompt is best cut into (its prefill chunk).
  virtual int64_t PrefillRows() const { return 256; }
  virtual const WeightLayout& layout() const = 0;

  // --- Weights: bound once after loading; checks type, shape and layout here, never per call.
  virtual Result<BoundWeight> BindMatrix(const Weight& w) = 0;  // for MatMul
  // f32 (n) for RmsNorm and AddRow, or a small f32 (rows, cols) table read whole (a conv kernel).
  virtual Result<BoundWeight> BindVector(const Weight& w) = 0;
  // A table for Embed; lookups round-trip through `as_type` (a lookup in a higher-precision copy
  // then gives exactly the values of a table converted to as_type).
  virtual Result<BoundWeight> BindEmbedding(const Weight& table, GgmlType as_type) = 0;
  virtual Result<int32_t> BindRope(const RopeSpec& rope) = 0;
  // A Gated-DeltaNet layer; fails on backends without its kernels.
  virtual Result<int32_t> BindDeltaNet(const DeltaNetSpec& spec) = 0;
  // Whether BindMoe can succeed: models with experts are refused before their weights are bound.
  virtual bool RunsMoe() const { return false; }
  // A mixture-of-experts FFN for MoeFfn (its weights bound already); fails on backends without it.
  virtual Result<int32_t> BindMoe(const MoeSpec& spec) {
    return Unsupported("the {} backend does not run mixture-of-experts layers yet", name());
  }

  // --- Memory.
  virtual Result<Tensor> Alloc(int64_t rows, int64_t cols) = 0;
  virtual void Free(Tensor t) = 0;
  // A KV store of up to max_pages pages; page storage is made usable by GrowKv.
  virtual Result<int32_t> CreateKv(const KvGeometry& g, int64_t max_pages) = 0;
  virtual Status GrowKv(int32_t kv, int64_t n_pages) = 0;  // pages [0, n_pages) usable
  // Fixed-size per-sequence state slots (recurrent layers), zeroed when created.
  virtual Result<int32_t> CreateStates(size_t slot_bytes, int64_t n_slots) = 0;

  // --- Queued work.
  // The batch the following calls refer to; the arrays are copied.
  virtual void SetBatch(const BatchPlan& batch) = 0;
  // out (n_rows, d) = rows of the table for the batch's tokens.
  virtual void Embed(BoundWeight table, Tensor out) = 0;
  // y (n, w.rows) = x (n, w.cols) . w^T.
  virtual void MatMul(BoundWeight w, Tensor x, Tensor y) = 0;
  // y = x / rms(x) * w per row of x (x.cols == w.cols); y may be x.
  virtual void RmsNorm(Tensor x, BoundWeight w, Tensor y, float eps) = 0;
  // x[r] += b for each row.
  virtual void AddRow(Tensor x, BoundWeight b) = 0;
  // x += y.
  virtual void Add(Tensor x, Tensor y) = 0;
  // g = silu(g) * u.
  virtual void SiluMul(Tensor g, Tensor u) = 0;
  // Several products of one input (a layer's q, k and v): y[i] = x . w[i]^T, the values of MatMul on
  // each, which is what it does where a backend does not fuse them.
  virtual void MatMuls(Tensor x, std::span<const BoundWeight> w, std::span<const Tensor> y) {
    for (size_t i = 0; i < w.size() && i < y.size(); ++i) MatMul(w[i], x, y[i]);
  }
  // A SwiGLU feed-forward's first half: g = silu(x . gate^T) * (x . up^T), u = x . up^T. The values
  // of the three calls below, which is what it does where a backend does not fuse them.
  virtual void MatMulSwiGLU(BoundWeight gate, BoundWeight up, Tensor x, Tensor g, Tensor u) {
    MatMul(gate, x, g);
    MatMul(up, x, u);
    SiluMul(g, u);
  }
  // Rotates every head (x.cols / head_dim of them) of row r by the batch's positions[r].
  virtual void Rope(Tensor x, int64_t head_dim, int32_t rope) = 0;
  // Stores row r of k and v (n_kv_head * head_dim) at positions[r] of its sequence, layer `layer`.
  virtual void KvWrite(int32_t kv, int64_t layer, Tensor k, Tensor v) = 0;
  // out (n_rows, n_head * head_dim): causal attention of each row's query heads over its sequence's
  // keys and values (grouped-query: n_head / n_kv_head query heads per KV head).
  virtual void Attention(int32_t kv, int64_t layer, Tensor q, float scale, Tensor out) = 0;
  // x *= sigmoid(g), element-wise.
  virtual void SigmoidMul(Tensor x, Tensor g) = 0;
  // Each row of x is heads of 2 * head_dim: a gets the first head_dim of every head, b the second.
  virtual void SplitHeads(Tensor x, int64_t head_dim, Tensor a, Tensor b) = 0;
  // x = x / rms(x) * w * silu(z) per row (x.cols == w.cols; z has x's shape).
  virtual void GatedRmsNorm(Tensor x, BoundWeight w, Tensor z, float eps) = 0;
  // Gated-DeltaNet layer `dn`, in place on x (n_rows, conv_dim): the causal depthwise convolution
  // with kernel `conv` (conv_dim, conv_kernel) over each sequence's rows, continuing from the
  // convolution state in its slot (and leaving the last inputs there), then SiLU.
  virtual void DeltaNetConv(int32_t states, int32_t dn, Tensor x, BoundWeight conv) = 0;
  // The gated delta rule of layer `dn` over each sequence's rows in order, continuing its recurrent
  // state. x (n_rows, conv_dim) holds q | k | v after the convolution; b and a (n_rows, n_v_head) the
  // beta and decay projections: beta = sigmoid(b), decay = exp(ssm_a * softplus(a + dt_bias)).
  // q and k are L2-normalized, q scaled by 1/sqrt(k_dim). out (n_rows, n_v_head * v_dim).
  virtual void DeltaNetRule(int32_t states, int32_t dn, Tensor x, Tensor b, Tensor a, BoundWeight ssm_a,
                            BoundWeight dt_bias, Tensor out) = 0;
  // out (n_rows, d) = mixture-of-experts FFN `moe` (MoeSpec) of x (n_rows, d); out is not x. Called only
  // with an id BindMoe gave, so a backend without experts never is.
  virtual void MoeFfn(int32_t moe, Tensor x, Tensor out) {}
  // out[i] = x[out_rows[i]].
  virtual void GatherOutRows(Tensor x, Tensor out) = 0;
  // Copies page src into page dst (copy-on-write of a shared partial page).
  virtual void CopyKvPage(int32_t kv, int32_t src, int32_t dst) = 0;
  // Copies state slot src into slot dst (snapshots and restores).
  virtual void CopyState(int32_t states, int64_t src, int64_t dst) = 0;
  // Zeroes a state slot (a new sequence).
  virtual void ClearState(int32_t states, int64_t slot) = 0;
  // Copies t to host memory (t.rows * t.cols floats) once the queue reaches it.
  virtual void Download(Tensor t, float* host) = 0;
  // Marks caller memory that downloads will land in again and again (a batched step's logits), so a
  // backend whose downloads cross a bus can copy into it directly instead of through its own staging
  // area. False: not done (nothing to do, or the system refused), and downloads work as before.
  // UnpinHost must be called with the same pointer before the memory is freed.
  virtual bool PinHost(void* host, size_t bytes) { return false; }
  virtual void UnpinHost(void* host) {}
  // Sets *finite, once the queue reaches it (Synchronize at the latest), to whether every value of x
  // is finite: checked where x lives, so a caller need not scan its downloaded copy (a batched decode
  // step's logits are tens of MB).
  virtual void CheckFinite(Tensor x, bool* finite) = 0;
  // Waits for the queued work; the first error since the last call, with the queue cleared.
  virtual Status Synchronize() = 0;

  // --- Measurement (benchmarks only; runs for about min_seconds).
  // GB/s that this backend's memory streams now, the roofline of a decode step: the CPU backend reads
  // its bound matrices with all its threads in a plain loop; the CUDA backend copies one 1 GiB device
  // buffer into another, counting the bytes read and written, as a copy benchmark does.
  virtual Result<double> MeasureBandwidth(double min_seconds) {
    return Unsupported("{}: no bandwidth measurement", name());
  }
};

struct BackendOptions {
  std::string name = "cpu";
  int threads = 0;  // CPU threads, 0: FAK_THREADS or every CPU
};

// The backends compiled into this binary, by name.
Result<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options = {});
// The layout the default (CPU) backend prefers, for loading without a backend at hand.
const WeightLayout& DefaultWeightLayout();

}  // namespace fak
