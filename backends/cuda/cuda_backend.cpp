#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "backends/cpu/ops.h"           // EmbeddingRow: the reference lookup, run on the host
#include "backends/cuda/activations.h"  // Activations
#include "backends/cuda/kernels.h"      // MatVec, RmsNorm, Attention, ...
#include "backends/cuda/step.h"         // StepQueue
#include "backends/cuda/weights.h"      // RepackForDevice

namespace fak::cuda {
namespace {

uint64_t U(const void* p) { return reinterpret_cast<uint64_t>(p); }
uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }

// FAK_CUDA_GRAPHS=0 runs every step op by op (for comparisons).
bool GraphsEnabled() {
  const char* v = std::getenv("FAK_CUDA_GRAPHS");
  return v == nullptr || v[0] != '0';
}

std::string ErrorText(cudaError_t e) {
  return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

Status CudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal("CUDA: {}: {}", what, ErrorText(e));
}

class GgufRows final : public WeightLayout {
 public:
  bool Repacks(GgmlType, int64_t) const override { return false; }
  size_t Bytes(GgmlType type, int64_t rows, int64_t cols) const override {
    return static_cast<size_t>(rows) * GgmlRowBytes(type, static_cast<uint64_t>(cols)).value_or(0);
  }
  int64_t GroupRows() const override { return 1; }
  size_t GroupBytes(GgmlType type, int64_t cols) const override { return Bytes(type, 1, cols); }
  Status Convert(GgmlType type, const uint8_t* rows, int64_t n, int64_t cols, uint8_t* group) const override {
    std::memcpy(group, rows, Bytes(type, n, cols));
    return Status::Ok();
  }
};

struct KvStore {
  KvGeometry g;
  int64_t max_pages = 0;
  size_t page_bytes = 0;
  std::vector<void*> chunks;    // cudaMalloc'd runs of pages
  std::vector<void*> page_ptr;  // host copy of the page table
  void** page_ptr_dev = nullptr;
  DeviceKv View() const { return {page_ptr_dev, g.n_kv_head, g.head_dim, g.page_tokens, g.f32}; }
};

struct States {
  size_t slot_bytes = 0;
  int64_t n_slots = 0;
  uint8_t* data = nullptr;
};

struct Embedding {
  Weight table;
  GgmlType as_type;
};

// Pinned host memory and its device twin: what a step uploads (batch arrays, RoPE tables, embedded
// rows) goes through one pair, reset when the queue is drained.
struct Staging {
  uint8_t* host = nullptr;
  uint8_t* dev = nullptr;
  size_t capacity = 0, used = 0;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(cudaStream_t stream) : stream_(stream), q_(stream) {}

  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    q_.ForgetGraphs();
    for (const auto& m : matrices_) {
      cudaFree(const_cast<uint8_t*>(m.q));
      cudaFree(const_cast<uint16_t*>(m.d));
    }
    for (float* v : vectors_) cudaFree(v);
    for (auto& kv : kv_) {
      for (void* c : kv.chunks) cudaFree(c);
      cudaFree(kv.page_ptr_dev);
    }
    for (auto& s : states_) cudaFree(s.data);
    cudaFreeHost(up_.host);
    cudaFree(split_);
    cudaFree(graph_split_);
    cudaFree(attn_part_);
    cudaFree(up_.dev);
    cudaFreeHost(down_.host);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  int threads() const override { return 0; }
  // The GEMM tiles 64 activation rows; at 512 a 1.5B model's narrow matrices fill the GPU's 132 SMs.
  int64_t PrefillRows() const override { return 512; }
  const WeightLayout& layout() const override { return CudaWeightLayout(); }

  Result<BoundWeight> BindMatrix(const Weight& w) override {
    FAK_ASSIGN_OR_RETURN(HostMatrix h, RepackForDevice(w));
    DeviceMatrix m{h.format, w.rows, w.cols, nullptr, nullptr};
    FAK_ASSIGN_OR_RETURN(void* q, DeviceAlloc(h.q.size(), "a weight matrix"));
    m.q = static_cast<const uint8_t*>(q);
    FAK_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpy(q, h.q.data(), h.q.size(), cudaMemcpyHostToDevice), "weight upload"));
    if (!h.d.empty()) {
      FAK_ASSIGN_OR_RETURN(void* d, DeviceAlloc(h.d.size() * 2, "weight scales"));
      m.d = static_cast<const uint16_t*>(d);
      FAK_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpy(d, h.d.data(), h.d.size() * 2, cudaMemcpyHostToDevice), "scale upload"));
    }
    matrices_.push_back(m);
    // Matrices narrow enough that the GEMM may compute their pieces in separate blocks (its scratch).
    if (ReadsQ8(m.format) && QuantPieces(m.cols) > 1 && m.rows <= kSplitMaxRows) {
      split_rows_ = std::max(split_rows_, m.rows);
    }
    return BoundWeight{static_cast<int32_t>(matrices_.size() - 1), w.rows, w.cols};
  }

  Result<BoundWeight> BindVector(const Weight& w) override {
    if (!w.present() || w.type != GgmlType::kF32 || w.packed) {
      return InvalidArgument("a vector weight must be f32 rows");
    }
    const size_t bytes = static_cast<size_t>(w.rows * w.cols) * 4;
    FAK_ASSIGN_OR_RETURN(void* p, DeviceAlloc(bytes, "a vector weight"));
    vectors_.push_back(static_cast<float*>(p));
    FAK_RETURN_IF_ERROR(CudaStatus(cudaMemcpy(p, w.data, bytes, cudaMemcpyHostToDevice), "vector upload"));
    return BoundWeight{static_cast<int32_t>(vectors_.size() - 1), w.rows, w.cols};
  }

  Result<BoundWeight> BindEmbedding(const Weight& table, GgmlType as_type) override {
    if (!table.present() || table.packed) return InvalidArgument("an embedding table must be GGUF rows");
    // Looked up on the host (the table stays in the model's host memory): a step embeds few rows.
    embeddings_.push_back({table, as_type});
    max_embed_cols_ = std::max(max_embed_cols_, table.cols);
    return BoundWeight{static_cast<int32_t>(embeddings_.size() - 1), table.rows, table.cols};
  }

  Result<int32_t> BindRope(const RopeSpec& rope) override {
    if (rope.inv_freq.empty()) return InvalidArgument("rope with no frequencies");
    ropes_.push_back(rope);
    return static_cast<int32_t>(ropes_.size() - 1);
  }

  Result<int32_t> BindDeltaNet(const DeltaNetSpec& d) override {
    if (d.n_k_head <= 0 || d.n_v_head <= 0 || d.k_dim <= 0 || d.v_dim <= 0 || d.n_v_head % d.n_k_head != 0) {
      return InvalidArgument("Gated-DeltaNet geometry: {} key and {} value heads of {} and {}", d.n_k_head,
                             d.n_v_head, d.k_dim, d.v_dim);
    }
    if (d.conv_kernel < 1 || d.conv_kernel > 16 || d.v_dim > 128 || d.k_dim > 128) {
      return Unsupported(
          "CUDA: Gated-DeltaNet convolution width {} or head dims {} x {} (fak runs widths to 16, "
          "key and value heads to 128)",
          d.conv_kernel, d.k_dim, d.v_dim);
    }
    delta_nets_.push_back(d);
    return static_cast<int32_t>(delta_nets_.size() - 1);
  }

  void SigmoidMul(Tensor x, Tensor g) override {
    if (!error_.ok()) return;
    FlushRopes();
    float* xs = x.data;
    const float* gs = g.data;
    const int64_t n = x.rows * x.cols;
    Queue("SigmoidMul", {U(xs), U(gs), U(n)},
          [=](cudaStream_t s) { return fak::cuda::SigmoidMul(xs, gs, n, s); });
    Written(x);
  }

  void SplitHeads(Tensor x, int64_t head_dim, Tensor a, Tensor b) override {
    if (!error_.ok()) return;
    FlushRopes();
    const float* xs = x.data;
    float* as = a.data;
    float* bs = b.data;
    const int64_t heads = x.rows * x.cols / (2 * head_dim);
    Queue("SplitHeads", {U(xs), U(heads), U(head_dim), U(as), U(bs)},
          [=](cudaStream_t s) { return fak::cuda::SplitHeads(xs, heads, head_dim, as, bs, s); });
    Written(a);
    Written(b);
  }

  void GatedRmsNorm(Tensor x, BoundWeight w, Tensor z, float eps) override {
    if (!error_.ok()) return;
    FlushRopes();
    float* xs = x.data;
    const float* wv = vectors_[static_cast<size_t>(w.id)];
    const float* zs = z.data;
    const int64_t rows = x.rows, cols = x.cols;
    uint32_t eps_bits;
    std::memcpy(&eps_bits, &eps, 4);
    Queue("GatedRmsNorm", {U(xs), U(wv), U(zs), U(rows), U(cols), eps_bits},
          [=](cudaStream_t s) { return fak::cuda::GatedRmsNorm(xs, wv, zs, rows, cols, eps, s); });
    Written(x);
  }

  void DeltaNetConv(int32_t states, int32_t dn, Tensor x, BoundWeight conv) override {
    if (!error_.ok()) return;
    FlushRopes();
    const DeltaNetDevice d = DeviceDeltaNet(states, dn);
    float* xs = x.data;
    const float* w = vectors_[static_cast<size_t>(conv.id)];
    const int32_t* seqs = seqs_dev_;
    const int64_t n_seqs = n_seqs_;
    Queue("DeltaNetConv", {U(xs), U(w), U(d.states), U(d.conv_offset), U(seqs), U(n_seqs)},
          [=](cudaStream_t s) { return fak::cuda::DeltaNetConv(xs, w, d, seqs, n_seqs, s); });
    Written(x);
  }

  void DeltaNetRule(int32_t states, int32_t dn, Tensor x, Tensor b, Tensor a, BoundWeight ssm_a,
                    BoundWeight dt_bias, Tensor out) override {
    if (!error_.ok()) return;
    FlushRopes();
    const DeltaNetDevice d = DeviceDeltaNet(states, dn);
    const float* xs = x.data;
    const float* bs = b.data;
    const float* as = a.data;
    const float* av = vectors_[static_cast<size_t>(ssm_a.id)];
    const float* dtv = vectors_[static_cast<size_t>(dt_bias.id)];
    float* os = out.data;
    const int32_t* seqs = seqs_dev_;
    const int64_t n_seqs = n_seqs_;
    Queue(
        "DeltaNetRule",
        {U(xs), U(bs), U(as), U(av), U(dtv), U(d.states), U(d.rule_offset), U(seqs), U(n_seqs), U(os)},
        [=](cudaStream_t s) { return fak::cuda::DeltaNetRule(xs, bs, as, av, dtv, d, seqs, n_seqs, os, s); });
    Written(out);
  }

  Result<Tensor> Alloc(int64_t rows, int64_t cols) override { return acts_.Alloc(rows, cols, stream_); }

  void Free(Tensor t) override {
    cudaStreamSynchronize(stream_);        // no queued work may still use it
    if (acts_.Free(t)) q_.ForgetGraphs();  // a new buffer may take this address
  }

  Result<int32_t> CreateKv(const KvGeometry& g, int64_t max_pages) override {
    if (g.n_layer <= 0 || g.n_kv_head <= 0 || g.head_dim <= 0 || g.page_tokens <= 0 || max_pages <= 0) {
      return InvalidArgument("KV geometry has an empty dimension");
    }
    KvStore s;
    s.g = g;
    s.max_pages = max_pages;
    s.page_bytes =
        2 * static_cast<size_t>(g.n_layer * g.n_kv_head * g.page_tokens * g.head_dim) * (g.f32 ? 4 : 2);
    FAK_ASSIGN_OR_RETURN(void* table,
                         DeviceAlloc(static_cast<size_t>(max_pages) * sizeof(void*), "the KV page table"));
    s.page_ptr_dev = static_cast<void**>(table);
    kv_.push_back(std::move(s));
    return static_cast<int32_t>(kv_.size() - 1);
  }

  Status GrowKv(int32_t kv, int64_t n_pages) override {
    KvStore& s = kv_[static_cast<size_t>(kv)];
    if (n_pages > s.max_pages)
      return OutOfRange("KV store holds {} pages, {} asked for", s.max_pages, n_pages);
    const auto have = static_cast<int64_t>(s.page_ptr.size());
    if (n_pages <= have) return Status::Ok();
    // Pages come in runs that double the store (at least 16 pages), so a growing cache allocates rarely.
    const int64_t add = std::min(s.max_pages - have, std::max({n_pages - have, have, int64_t{16}}));
    FAK_ASSIGN_OR_RETURN(void* run, DeviceAlloc(static_cast<size_t>(add) * s.page_bytes, "KV cache pages"));
    s.chunks.push_back(run);
    FAK_RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(run, 0, static_cast<size_t>(add) * s.page_bytes, stream_),
                                   "zeroing KV pages"));
    for (int64_t i = 0; i < add; ++i)
      s.page_ptr.push_back(static_cast<uint8_t*>(run) + static_cast<size_t>(i) * s.page_bytes);
    // From pageable memory: the copy is staged before the call returns, so the vector may change after.
    return CudaStatus(
        cudaMemcpyAsync(s.page_ptr_dev + have, s.page_ptr.data() + have,
                        static_cast<size_t>(add) * sizeof(void*), cudaMemcpyHostToDevice, stream_),
        "KV page table upload");
  }

  Result<int32_t> CreateStates(size_t slot_bytes, int64_t n_slots) override {
    if (slot_bytes == 0 || n_slots <= 0) return InvalidArgument("state store with no slots");
    States s{slot_bytes, n_slots, nullptr};
    FAK_ASSIGN_OR_RETURN(void* p,
                         DeviceAlloc(slot_bytes * static_cast<size_t>(n_slots), "recurrent state slots"));
    s.data = static_cast<uint8_t*>(p);
    FAK_RETURN_IF_ERROR(
        CudaStatus(cudaMemset(p, 0, slot_bytes * static_cast<size_t>(n_slots)), "zeroing states"));
    states_.push_back(s);
    return static_cast<int32_t>(states_.size() - 1);
  }

  void SetBatch(const BatchPlan& b) override {
    ropes_pending_.clear();
    if (q_.in_step()) {  // a step that never reached Synchronize
      q_.Discard();
      pending_.clear();
      down_.used = 0;
    }
    if (!error_.ok() || !DrainDownloads()) return;
    n_rows_ = static_cast<int64_t>(b.tokens.size());
    n_out_ = static_cast<int64_t>(b.out_rows.size());
    max_ctx_ = 0;
    for (const int32_t p : b.positions) max_ctx_ = std::max<int64_t>(max_ctx_, int64_t{p} + 1);
    ReserveSplit();
    tokens_.assign(b.tokens.begin(), b.tokens.end());
    // Everything the step uploads, in one pinned area: the batch arrays, every RoPE's cos/sin per row
    // (computed as the CPU backend computes them, in double), the embedded rows, and last the page
    // table, the only part whose size changes from step to step: every other part sits at an address
    // that depends on the batch's shape alone, which is what lets a captured graph be replayed.
    size_t need = 0;
    for (const auto* a : {&b.positions, &b.row_seq, &b.page_begin, &b.out_rows, &b.pages})
      need += Align(a->size() * 4);
    // Each sequence's (first row, rows, state slot), for the recurrent layers.
    seqs_host_.clear();
    if (!b.state_slot.empty()) {
      for (size_t r = 0; r < b.row_seq.size(); ++r) {
        if (r == 0 || b.row_seq[r] != b.row_seq[r - 1]) {
          const int32_t slot = b.state_slot[static_cast<size_t>(b.row_seq[r])];
          seqs_host_.insert(seqs_host_.end(), {static_cast<int32_t>(r), 0, slot});
        }
        ++seqs_host_[seqs_host_.size() - 2];
      }
    }
    n_seqs_ = static_cast<int64_t>(seqs_host_.size() / 3);
    need += Align(seqs_host_.size() * 4);
    for (const RopeSpec& r : ropes_) need += Align(static_cast<size_t>(n_rows_) * r.inv_freq.size() * 2 * 4);
    need += Align(static_cast<size_t>(n_rows_ * max_embed_cols_) * 4);
    if (!Reserve(up_, need, true)) return;
    up_.used = 0;
    batch_.positions = Stage(b.positions);
    batch_.row_seq = Stage(b.row_seq);
    batch_.page_begin = Stage(b.page_begin);
    out_rows_dev_ = Stage(b.out_rows);
    seqs_dev_ = Stage(std::span<const int32_t>(seqs_host_));
    rope_tables_.clear();
    for (const RopeSpec& r : ropes_) {
      const size_t half = r.inv_freq.size();
      auto* c0 = reinterpret_cast<float*>(up_.host + up_.used);
      for (int64_t row = 0; row < n_rows_; ++row) {
        float* c = c0 + static_cast<size_t>(row) * half * 2;
        const double pos = static_cast<double>(b.positions[static_cast<size_t>(row)]);
        for (size_t i = 0; i < half; ++i) {
          const double angle = pos * static_cast<double>(r.inv_freq[i]);
          c[i] = static_cast<float>(std::cos(angle)) * r.attn_factor;
          c[half + i] = static_cast<float>(std::sin(angle)) * r.attn_factor;
        }
      }
      rope_tables_.push_back(reinterpret_cast<const float*>(up_.dev + up_.used));
      up_.used += Align(static_cast<size_t>(n_rows_) * half * 2 * 4);
    }
    embed_at_ = up_.used;
    up_.used += Align(static_cast<size_t>(n_rows_ * max_embed_cols_) * 4);
    batch_.pages = Stage(b.pages);
    q_.Begin({U(n_rows_), U(n_out_), U(static_cast<int64_t>(b.page_begin.size())), U(up_.dev), U(down_.host)},
             graphs_ && n_rows_ <= kGraphRows);
  }

  void Embed(BoundWeight table, Tensor out) override {
    if (!error_.ok()) return;
    FlushRopes();
    const Embedding& e = embeddings_[static_cast<size_t>(table.id)];
    if (out.cols > max_embed_cols_ || out.rows != n_rows_)
      return Fail(Internal("CUDA: Embed into a tensor of the wrong shape"));
    auto* rows = reinterpret_cast<float*>(up_.host + embed_at_);
    for (int64_t r = 0; r < n_rows_; ++r) {
      Status s = cpu::EmbeddingRow(e.table, tokens_[static_cast<size_t>(r)], rows + r * out.cols, e.as_type);
      if (!s.ok()) return Fail(std::move(s));
    }
    // The rows travel with the step's upload; the step copies them into place.
    const size_t bytes = static_cast<size_t>(n_rows_ * out.cols) * 4;
    const uint8_t* src = up_.dev + embed_at_;
    float* dst = out.data;
    Queue("Embed", {U(dst), U(src), bytes},
          [=](cudaStream_t s) { return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s); });
    Written(out);
  }

  void MatMul(BoundWeight w, Tensor x, Tensor y) override {
    if (!error_.ok()) return;
    FlushRopes();
    const DeviceMatrix& m = matrices_[static_cast<size_t>(w.id)];
    Q8Act xq;
    if (ReadsQ8(m.format) && !ShadowOf(x, &xq)) return;
    Check(q_.AddMatVec(m, MatVecOut{.y = y.data, .ldy = y.cols}, x.data, xq, x.rows), "MatMul");
    Written(y);
  }

  void RmsNorm(Tensor x, BoundWeight w, Tensor y, float eps) override {
    if (!error_.ok()) return;
    FlushRopes();
    Q8Act sh;
    const bool shadow = y.cols % 32 == 0 && ShadowSlot(y, &sh);
    int8_t* q = shadow ? const_cast<int8_t*>(sh.q) : nullptr;
    float* d = shadow ? const_cast<float*>(sh.d) : nullptr;
    const float* wv = vectors_[static_cast<size_t>(w.id)];
    const int64_t rows = x.rows, cols = x.cols;
    const float* xs = x.data;
    float* ys = y.data;
    uint32_t eps_bits;
    std::memcpy(&eps_bits, &eps, 4);
    Queue("RmsNorm", {U(xs), U(wv), U(ys), U(rows), U(cols), eps_bits, U(q), U(d)},
          [=](cudaStream_t s) { return fak::cuda::RmsNorm(xs, wv, ys, rows, cols, eps, q, d, s); });
    shadow ? Shadowed(y) : Written(y);
  }

  void AddRow(Tensor x, BoundWeight b) override {
    if (!error_.ok()) return;
    FlushRopes();
    const float* bv = vectors_[static_cast<size_t>(b.id)];
    if (!q_.FuseBias(x.data, x.rows, x.cols, bv)) {
      float* xs = x.data;
      const int64_t rows = x.rows, cols = x.cols;
      Queue("AddRow", {U(xs), U(bv), U(rows), U(cols)},
            [=](cudaStream_t s) { return fak::cuda::AddRow(xs, bv, rows, cols, s); });
    }
    Written(x);
  }

  void Add(Tensor x, Tensor y) override {
    if (!error_.ok()) return;
    FlushRopes();
    if (!q_.FuseResidual(x.data, y.data, x.rows, x.cols)) {
      float* xs = x.data;
      const float* ys = y.data;
      const int64_t n = x.rows * x.cols;
      Queue("Add", {U(xs), U(ys), U(n)}, [=](cudaStream_t s) { return fak::cuda::Add(xs, ys, n, s); });
    }
    Written(x);
  }

  void SiluMul(Tensor g, Tensor u) override {
    if (!error_.ok()) return;
    FlushRopes();
    Q8Act sh;
    const bool shadow = ShadowSlot(g, &sh);
    int8_t* q = shadow ? const_cast<int8_t*>(sh.q) : nullptr;
    float* d = shadow ? const_cast<float*>(sh.d) : nullptr;
    float* gs = g.data;
    const float* us = u.data;
    const int64_t n = g.rows * g.cols;
    Queue("SiluMul", {U(gs), U(us), U(n), U(q), U(d)},
          [=](cudaStream_t s) { return fak::cuda::SiluMul(gs, us, n, q, d, s); });
    shadow ? Shadowed(g) : Written(g);
  }

  // Within a step a Rope waits: when the KvWrite of its keys follows, the q rope, the k rope and the
  // write become one launch (RopeKvWrite).
  void Rope(Tensor x, int64_t head_dim, int32_t rope) override {
    if (!error_.ok()) return;
    if (q_.in_step() && ropes_pending_.size() < 2) {
      ropes_pending_.push_back({x, head_dim, rope});
    } else {
      FlushRopes();
      QueueRope({x, head_dim, rope});
    }
    Written(x);
  }

  void KvWrite(int32_t kv, int64_t layer, Tensor k, Tensor v) override {
    if (!error_.ok()) return;
    const DeviceKv view = kv_[static_cast<size_t>(kv)].View();
    const DeviceBatch b = batch_;
    float* ks = k.data;
    const float* vs = v.data;
    const int64_t rows = k.rows;
    // The pending rope of these keys (the last pending one), and of the queries before it, if any.
    const size_t n = ropes_pending_.size();
    if (n > 0 && ropes_pending_[n - 1].x.data == k.data && ropes_pending_[n - 1].head_dim == view.head_dim &&
        ropes_pending_[n - 1].x.cols == k.cols && k.cols == v.cols &&
        (n == 1 || (ropes_pending_[0].rope == ropes_pending_[1].rope &&
                    ropes_pending_[0].head_dim == view.head_dim && ropes_pending_[0].x.rows == rows))) {
      const PendingRope kr = ropes_pending_[n - 1];
      float* qs = n == 2 ? ropes_pending_[0].x.data : nullptr;
      const int64_t q_cols = n == 2 ? ropes_pending_[0].x.cols : 0;
      ropes_pending_.clear();
      const RopeSpec& r = ropes_[static_cast<size_t>(kr.rope)];
      const int64_t half = static_cast<int64_t>(r.inv_freq.size()), hd = view.head_dim;
      const float* table = rope_tables_[static_cast<size_t>(kr.rope)];
      const bool neox = r.neox;
      Queue("RopeKvWrite",
            {U(qs), U(q_cols), U(ks), U(vs), U(rows), U(hd), U(half), U(table), neox, U(view.page_ptr),
             U(layer), U(b.positions), U(b.pages)},
            [=](cudaStream_t s) {
              return fak::cuda::RopeKvWrite(qs, q_cols, ks, vs, rows, hd, half, table, neox, view, b, layer,
                                            s);
            });
      return;
    }
    FlushRopes();
    Queue("KvWrite", {U(view.page_ptr), U(layer), U(ks), U(vs), U(rows), U(b.positions), U(b.pages)},
          [=](cudaStream_t s) { return fak::cuda::KvWrite(view, b, layer, ks, vs, rows, s); });
  }

  void Attention(int32_t kv, int64_t layer, Tensor q, float scale, Tensor out) override {
    if (!error_.ok()) return;
    FlushRopes();
    const KvStore& st = kv_[static_cast<size_t>(kv)];
    Q8Act sh;
    const bool shadow = st.g.head_dim % 32 == 0 && ShadowSlot(out, &sh);
    int8_t* oq = shadow ? const_cast<int8_t*>(sh.q) : nullptr;
    float* od = shadow ? const_cast<float*>(sh.d) : nullptr;
    const DeviceKv view = st.View();
    const DeviceBatch b = batch_;
    const float* qs = q.data;
    float* os = out.data;
    const int64_t rows = q.rows, n_head = q.cols / st.g.head_dim, max_ctx = max_ctx_;
    // Scratch for the chunk partials of long contexts.
    const int64_t part_floats = AttnPartFloats(rows, n_head, st.g.head_dim, max_ctx);
    if (part_floats > attn_part_floats_ && !GrowAttnPart(part_floats)) return;
    float* part = part_floats > 0 ? attn_part_ : nullptr;
    uint32_t scale_bits;
    std::memcpy(&scale_bits, &scale, 4);
    Queue("Attention",
          {U(view.page_ptr), U(layer), U(qs), U(rows), U(n_head), scale_bits, U(os), U(oq), U(od),
           U(b.positions), U(b.pages), U(part), U(part_floats > 0 ? AttnChunks(max_ctx) : 1)},
          [=](cudaStream_t s) {
            return fak::cuda::Attention(view, b, layer, qs, rows, n_head, scale, os, oq, od, max_ctx, part,
                                        s);
          });
    shadow ? Shadowed(out) : Written(out);
  }

  void GatherOutRows(Tensor x, Tensor out) override {
    if (!error_.ok()) return;
    FlushRopes();
    const float* xs = x.data;
    float* os = out.data;
    const int64_t cols = x.cols, n = n_out_;
    const int32_t* rows = out_rows_dev_;
    Queue("GatherOutRows", {U(xs), U(os), U(cols), U(n), U(rows)},
          [=](cudaStream_t s) { return fak::cuda::Gather(xs, cols, rows, n, os, s); });
    Written(out);
  }

  void CopyKvPage(int32_t kv, int32_t src, int32_t dst) override {
    if (!error_.ok()) return;
    FlushRopes();
    const KvStore& st = kv_[static_cast<size_t>(kv)];
    void* d = st.page_ptr[static_cast<size_t>(dst)];
    const void* sp = st.page_ptr[static_cast<size_t>(src)];
    const size_t bytes = st.page_bytes;
    Queue("CopyKvPage", {U(d), U(sp), bytes},
          [=](cudaStream_t s) { return cudaMemcpyAsync(d, sp, bytes, cudaMemcpyDeviceToDevice, s); });
  }

  void CopyState(int32_t states, int64_t src, int64_t dst) override {
    if (!error_.ok()) return;
    FlushRopes();
    const States& st = states_[static_cast<size_t>(states)];
    uint8_t* d = st.data + static_cast<size_t>(dst) * st.slot_bytes;
    const uint8_t* sp = st.data + static_cast<size_t>(src) * st.slot_bytes;
    const size_t bytes = st.slot_bytes;
    Queue("CopyState", {U(d), U(sp), bytes},
          [=](cudaStream_t s) { return cudaMemcpyAsync(d, sp, bytes, cudaMemcpyDeviceToDevice, s); });
  }

  void ClearState(int32_t states, int64_t slot) override {
    if (!error_.ok()) return;
    FlushRopes();
    const States& st = states_[static_cast<size_t>(states)];
    uint8_t* d = st.data + static_cast<size_t>(slot) * st.slot_bytes;
    const size_t bytes = st.slot_bytes;
    Queue("ClearState", {U(d), bytes}, [=](cudaStream_t s) { return cudaMemsetAsync(d, 0, bytes, s); });
  }

  void Download(Tensor t, float* host) override {
    if (!error_.ok()) return;
    FlushRopes();
    const size_t bytes = static_cast<size_t>(t.rows * t.cols) * 4;
    if (down_.used + bytes > down_.capacity) {
      // Within a step nothing has run yet, and SetBatch drained the stream: the pinned area can move
      // (the queued copies find it at launch). Outside a step, drain what is queued first.
      if (!q_.in_step() && !DrainDownloads()) return;
      if (!GrowDownloads(down_.used + bytes)) return;
    }
    const size_t at = down_.used;
    const float* src = t.data;
    Queue("Download", {U(src), at, bytes, U(down_.host)}, [this, src, at, bytes](cudaStream_t s) {
      return cudaMemcpyAsync(down_.host + at, src, bytes, cudaMemcpyDeviceToHost, s);
    });
    pending_.push_back({host, at, bytes});
    down_.used += bytes;
  }

  Status Synchronize() override {
    if (error_.ok()) FlushRopes();
    ropes_pending_.clear();
    if (q_.in_step()) {
      if (error_.ok()) {
        const size_t bytes = up_.used;
        Status s = q_.End([this, bytes] {
          return cudaMemcpyAsync(up_.dev, up_.host, bytes, cudaMemcpyHostToDevice, stream_);
        });
        if (!s.ok()) Fail(std::move(s));
      } else {
        q_.Discard();
        pending_.clear();  // their copies never ran
        down_.used = 0;
      }
    }
    DrainDownloads();
    Status s = std::move(error_);
    error_ = Status::Ok();
    return s;
  }

  int64_t graphs_captured() const { return q_.graphs_captured(); }

 private:
  struct PendingDownload {
    float* host;
    size_t offset, bytes;
  };

  static size_t Align(size_t n) { return (n + 255) / 256 * 256; }
  static constexpr int64_t kGraphRows = 64;  // steps of at most this many rows run as graphs
  static constexpr int64_t kSplitMaxRows = 4096;

  // The GEMM's piece scratch for this step. Steps that run as graphs (a graph keeps the address) share
  // one scratch sized for kGraphRows rows, allocated at the first such step and kept; larger steps
  // get another, grown to the batch. Without it (or if it cannot be had) the GEMM keeps a tile's
  // pieces in one block, which gives the same bits.
  void ReserveSplit() {
    q_.SetSplit(nullptr, 0);
    if (split_rows_ == 0) return;
    if (n_rows_ <= kGraphRows) {
      if (graph_split_ == nullptr) {
        auto p =
            DeviceAlloc(static_cast<size_t>(4 * kGraphRows * split_rows_) * 4, "the GEMM's piece scratch");
        if (!p.ok()) return;
        graph_split_ = static_cast<float*>(*p);
      }
      q_.SetSplit(graph_split_, 4 * kGraphRows * split_rows_);
      return;
    }
    const int64_t need = 4 * n_rows_ * split_rows_;
    if (need > split_cap_) {
      if (cudaStreamSynchronize(stream_) != cudaSuccess) return;
      cudaFree(split_);
      split_ = nullptr;
      split_cap_ = 0;
      auto p = DeviceAlloc(static_cast<size_t>(need) * 4, "the GEMM's piece scratch");
      if (!p.ok()) return;
      split_ = static_cast<float*>(*p);
      split_cap_ = need;
    }
    q_.SetSplit(split_, split_cap_);
  }

  // A larger scratch for attention's chunk partials. Only a step's first Attention grows it (every
  // layer of a step needs the same), so no op queued before holds the old address.
  bool GrowAttnPart(int64_t floats) {
    if (cudaStreamSynchronize(stream_) != cudaSuccess) {
      Fail(Internal("CUDA: synchronize before growing the attention scratch"));
      return false;
    }
    cudaFree(attn_part_);
    attn_part_ = nullptr;
    attn_part_floats_ = 0;
    auto p = DeviceAlloc(static_cast<size_t>(floats) * 4, "attention partials");
    if (!p.ok()) {
      Fail(p.status());
      return false;
    }
    attn_part_ = static_cast<float*>(*p);
    attn_part_floats_ = floats;
    q_.ForgetGraphs();
    return true;
  }

  struct PendingRope {
    Tensor x;
    int64_t head_dim;
    int32_t rope;
  };
  void QueueRope(const PendingRope& p) {
    const RopeSpec& r = ropes_[static_cast<size_t>(p.rope)];
    const int64_t half = static_cast<int64_t>(r.inv_freq.size()), rows = p.x.rows, cols = p.x.cols,
                  head_dim = p.head_dim;
    const float* table = rope_tables_[static_cast<size_t>(p.rope)];
    const bool neox = r.neox;
    float* xs = p.x.data;
    Queue("Rope", {U(xs), U(rows), U(cols), U(head_dim), U(half), U(table), neox},
          [=](cudaStream_t s) { return fak::cuda::Rope(xs, rows, cols, head_dim, half, table, neox, s); });
  }
  void FlushRopes() {
    for (const PendingRope& p : ropes_pending_) QueueRope(p);
    ropes_pending_.clear();
  }

  void Queue(const char* what, std::vector<uint64_t> key, StepQueue::Launch launch) {
    Check(q_.Add(what, std::move(key), std::move(launch)), what);
  }

  // A larger pinned download area; what was recorded into the old one finds the new at launch.
  bool GrowDownloads(size_t bytes) {
    const size_t cap = std::max(bytes, down_.capacity * 2);
    uint8_t* p = nullptr;
    if (cudaError_t e = cudaMallocHost(&p, cap); e != cudaSuccess) {
      Fail(Busy("CUDA: cannot pin {:.1f} MiB of host memory for downloads: {}", cap / 1048576.0,
                ErrorText(e)));
      return false;
    }
    if (down_.used > 0) std::memcpy(p, down_.host, down_.used);
    cudaFreeHost(down_.host);
    down_.host = p;
    down_.capacity = cap;
    q_.ForgetGraphs();
    return true;
  }

  void Fail(Status s) {
    if (error_.ok()) error_ = std::move(s);
  }
  void Check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) Fail(CudaStatus(e, what));
  }

  // Waits for the stream, then hands every pending download to its caller.
  bool DrainDownloads() {
    const cudaError_t e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) {
      Check(e, "synchronize");
      pending_.clear();
      down_.used = 0;
      return false;
    }
    for (const auto& p : pending_) std::memcpy(p.host, down_.host + p.offset, p.bytes);
    pending_.clear();
    down_.used = 0;
    return true;
  }

  // Makes room for `bytes` in a staging pair (with a device twin when `dev`); the stream must not be
  // reading the old area, so it is drained first.
  bool Reserve(Staging& s, size_t bytes, bool dev) {
    if (bytes <= s.capacity) return true;
    if (!DrainDownloads()) return false;
    q_.ForgetGraphs();
    const size_t cap = std::max(bytes, s.capacity * 2);
    cudaFreeHost(s.host);
    if (dev) cudaFree(s.dev);
    s = {};
    if (cudaError_t e = cudaMallocHost(&s.host, cap); e != cudaSuccess) {
      Fail(Busy("CUDA: cannot pin {:.1f} MiB of host memory for staging: {}", cap / 1048576.0, ErrorText(e)));
      return false;
    }
    if (dev) {
      auto p = DeviceAlloc(cap, "the upload staging area");
      if (!p.ok()) {
        Fail(p.status());
        return false;
      }
      s.dev = static_cast<uint8_t*>(*p);
    }
    s.capacity = cap;
    return true;
  }

  template <typename T>
  const T* Stage(std::span<const T> a) {
    std::memcpy(up_.host + up_.used, a.data(), a.size() * sizeof(T));
    const T* dev = reinterpret_cast<const T*>(up_.dev + up_.used);
    up_.used += Align(a.size() * sizeof(T));
    return dev;
  }

  DeltaNetDevice DeviceDeltaNet(int32_t states, int32_t dn) const {
    const DeltaNetSpec& spec = delta_nets_[static_cast<size_t>(dn)];
    const States& st = states_[static_cast<size_t>(states)];
    DeltaNetDevice d;
    d.states = st.data;
    d.slot_bytes = st.slot_bytes;
    d.conv_offset = spec.state_offset;
    d.rule_offset = spec.state_offset + spec.ConvStateBytes();
    d.n_k_head = spec.n_k_head;
    d.n_v_head = spec.n_v_head;
    d.k_dim = spec.k_dim;
    d.v_dim = spec.v_dim;
    d.conv_dim = spec.conv_dim();
    d.conv_kernel = static_cast<int>(spec.conv_kernel);
    d.eps = spec.eps;
    return d;
  }

  bool ShadowSlot(const Tensor& t, Q8Act* s) { return acts_.ShadowSlot(t, s); }
  void Shadowed(const Tensor& t) { acts_.Shadowed(t); }
  void Written(const Tensor& t) { acts_.Written(t); }
  // The int8 shadow of x for a quantized MatMul, quantized first (a queued op) when the op that wrote x
  // did not write it.
  bool ShadowOf(const Tensor& x, Q8Act* s) {
    if (!acts_.ShadowSlot(x, s)) {
      Fail(Internal("CUDA: a quantized MatMul needs an activation tensor of whole 32-element runs"));
      return false;
    }
    if (acts_.ShadowValid(x)) return true;
    const float* xs = x.data;
    const int64_t n = x.rows * x.cols;
    int8_t* q = const_cast<int8_t*>(s->q);
    float* d = const_cast<float*>(s->d);
    Queue("Quantize", {U(xs), U(n), U(q), U(d)},
          [=](cudaStream_t st) { return fak::cuda::Quantize(xs, n, q, d, st); });
    acts_.Shadowed(x);
    return error_.ok();
  }

  cudaStream_t stream_;
  Status error_ = Status::Ok();
  std::vector<DeviceMatrix> matrices_;
  std::vector<float*> vectors_;
  std::vector<Embedding> embeddings_;
  int64_t max_embed_cols_ = 0;
  int64_t split_rows_ = 0;  // the most rows of a matrix whose pieces the GEMM may split
  float* split_ = nullptr;  // its scratch for steps beyond kGraphRows rows: split_cap_ floats
  int64_t split_cap_ = 0;
  float* graph_split_ = nullptr;  // for steps that run as graphs: 4 * kGraphRows * split_rows_ floats
  float* attn_part_ = nullptr;    // attention's chunk partials: attn_part_floats_ floats
  int64_t attn_part_floats_ = 0;
  std::vector<RopeSpec> ropes_;
  Activations acts_;
  std::vector<KvStore> kv_;
  std::vector<States> states_;
  // The current batch.
  int64_t n_rows_ = 0, n_out_ = 0, max_ctx_ = 0;
  std::vector<int32_t> tokens_;
  size_t embed_at_ = 0;  // the embedded rows' offset in the upload area
  DeviceBatch batch_;
  const int32_t* out_rows_dev_ = nullptr;
  std::vector<int32_t> seqs_host_;  // (first row, rows, state slot) per sequence, with recurrent layers
  const int32_t* seqs_dev_ = nullptr;
  int64_t n_seqs_ = 0;
  std::vector<DeltaNetSpec> delta_nets_;
  std::vector<const float*> rope_tables_;
  std::vector<PendingRope> ropes_pending_;  // Rope calls waiting for the KvWrite that may join them
  Staging up_, down_;
  bool graphs_ = GraphsEnabled();
  StepQueue q_;  // after stream_, which it uses
  std::vector<PendingDownload> pending_;
};

}  // namespace

Result<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (e == cudaErrorInsufficientDriver) {
      int driver = 0;
      cudaDriverGetVersion(&driver);
      return Unsupported(
          "backend 'cuda': the NVIDIA driver supports CUDA {}.{}, fak was built for CUDA {}.{}",
          driver / 1000, driver % 1000 / 10, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    }
    return NotFound("backend 'cuda': no usable CUDA device ({})", ErrorText(e));
  }
  if (n == 0) return NotFound("backend 'cuda': no CUDA device found");
  if (options.device < 0 || options.device >= n) {
    return InvalidArgument("backend 'cuda': device {} does not exist ({} device(s))", options.device, n);
  }
  FAK_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(options.device), "selecting the device"));
  cudaStream_t stream = nullptr;
  FAK_RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream"));
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(stream));
}

const WeightLayout& CudaWeightLayout() {
  static const GgufRows layout;
  return layout;
}

}  // namespace fak::cuda
