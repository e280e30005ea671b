// The CPU backend's class, which CreateCpuBackend (cpu_backend.h) makes: its dense-transformer ops are
// defined in cpu_backend.cpp, the hybrid architectures' (Gated-DeltaNet, mixture of experts) in
// cpu_backend_hybrid.cpp. Only those two files include this header.
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels.h"  // KernelTable
#include "backends/cpu/matmul.h"   // QuantMatrix
#include "core/thread_pool.h"
#include "core/timer.h"

namespace fak::cpu::detail {

// A 64-byte aligned f32 allocation.
struct Aligned {
  void operator()(float* p) const { std::free(p); }
};

struct KvStore {
  KvGeometry g;
  int64_t max_pages = 0;
  size_t block_units = 0;  // uint16_t units of one (layer, kv head) block: page_tokens * head_dim * units
  size_t page_units = 0;   // 2 * n_layer * n_kv_head * block_units
  std::vector<std::unique_ptr<uint16_t[]>> pages;

  uint16_t* Block(int32_t page, int64_t layer, int64_t head, int kv) const {
    return pages[static_cast<size_t>(page)].get() +
           ((static_cast<size_t>(layer) * 2 + static_cast<size_t>(kv)) * static_cast<size_t>(g.n_kv_head) +
            static_cast<size_t>(head)) *
               block_units;
  }
};

// A 64-byte aligned f32 scratch buffer that only grows; null when memory runs out.
class Scratch {
 public:
  float* Get(int64_t n) {
    if (n > size_) {
      const size_t bytes = (static_cast<size_t>(n) * 4 + 63) / 64 * 64;
      p_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
      size_ = p_ != nullptr ? n : 0;
    }
    return p_.get();
  }

 private:
  std::unique_ptr<float, Aligned> p_;
  int64_t size_ = 0;
};

struct StateStore {
  size_t slot_bytes = 0;
  std::vector<uint8_t> data;
};

struct Embedding {
  Weight table;
  GgmlType as_type;
};

enum ProfiledOp {
  kEmbed,
  kMatMul,
  kRmsNorm,
  kAddRow,
  kAdd,
  kSiluMul,
  kRope,
  kKvWrite,
  kAttention,
  kGatherOutRows,
  kDownload,
  kGates,
  kDeltaNetConv,
  kDeltaNetRule,
  kMoe,
  kNumProfiledOps
};

// FAK_PROFILE=1: time per op kind, printed to stderr when the backend is destroyed.
bool ProfilingEnabled();

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& o)
      : pool_(o.threads > 0 ? o.threads : DefaultThreadCount(), o.pin), k_(Kernels()) {}

  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  const std::string& PoolStartError() const { return pool_.start_error(); }
  int threads() const override { return pool_.size(); }
  const WeightLayout& layout() const override { return CpuWeightLayout(); }

  Result<BoundWeight> BindMatrix(const Weight& w) override;

  Result<BoundWeight> BindVector(const Weight& w) override;

  Result<BoundWeight> BindEmbedding(const Weight& table, GgmlType as_type) override {
    if (!table.present() || table.packed) return InvalidArgument("an embedding table must be GGUF rows");
    embeddings_.push_back({table, as_type});
    return BoundWeight{static_cast<int32_t>(embeddings_.size() - 1), table.rows, table.cols};
  }

  Result<int32_t> BindRope(const RopeSpec& rope) override {
    if (rope.inv_freq.empty()) return InvalidArgument("rope with no frequencies");
    ropes_.push_back(rope);
    return static_cast<int32_t>(ropes_.size() - 1);
  }

  Result<int32_t> BindDeltaNet(const DeltaNetSpec& d) override;

  bool RunsMoe() const override { return true; }

  Result<int32_t> BindMoe(const MoeSpec& m) override;

  Result<Tensor> Alloc(int64_t rows, int64_t cols) override;

  void Free(Tensor t) override { buffers_.erase(t.data); }

  Result<int32_t> CreateKv(const KvGeometry& g, int64_t max_pages) override;

  Status GrowKv(int32_t kv, int64_t n_pages) override {
    KvStore& s = kv_[static_cast<size_t>(kv)];
    if (n_pages > s.max_pages) {
      return OutOfRange("KV store holds {} pages, {} asked for", s.max_pages, n_pages);
    }
    while (static_cast<int64_t>(s.pages.size()) < n_pages) {
      s.pages.push_back(std::make_unique<uint16_t[]>(s.page_units));
    }
    return Status::Ok();
  }

  Result<int32_t> CreateStates(size_t slot_bytes, int64_t n_slots) override;

  void SetBatch(const BatchPlan& b) override;

  void Embed(BoundWeight table, Tensor out) override;

  void MatMul(BoundWeight w, Tensor x, Tensor y) override;

  void MatMuls(Tensor x, std::span<const BoundWeight> w, std::span<const Tensor> y) override;
  void MatMulSwiGLU(BoundWeight gate, BoundWeight up, Tensor x, Tensor g, Tensor u) override;

  void RmsNorm(Tensor x, BoundWeight w, Tensor y, float eps) override;

  void AddRow(Tensor x, BoundWeight b) override;

  void Add(Tensor x, Tensor y) override;

  void SiluMul(Tensor g, Tensor u) override;

  void Rope(Tensor x, int64_t head_dim, int32_t rope) override;

  void KvWrite(int32_t kv, int64_t layer, Tensor k, Tensor v) override;

  void Attention(int32_t kv, int64_t layer, Tensor q, float scale, Tensor out) override;

  void SigmoidMul(Tensor x, Tensor g) override;

  void SplitHeads(Tensor x, int64_t head_dim, Tensor a, Tensor b) override;

  void GatedRmsNorm(Tensor x, BoundWeight w, Tensor z, float eps) override;

  void DeltaNetConv(int32_t states, int32_t dn, Tensor x, BoundWeight conv) override;

  void DeltaNetRule(int32_t states, int32_t dn, Tensor x, Tensor b, Tensor a, BoundWeight ssm_a,
                    BoundWeight dt_bias, Tensor out) override;

  // Routing, then each chosen expert over the rows that chose it (gathered into one product, so its
  // weights are read once per batch), each (row, rank) result kept apart and summed per row in rank
  // order: a row's bits do not depend on which rows share the batch (the products are row-invariant).
  void MoeFfn(int32_t id, Tensor x, Tensor out) override;

  void GatherOutRows(Tensor x, Tensor out) override;

  void CopyKvPage(int32_t kv, int32_t src, int32_t dst) override;

  void CopyState(int32_t states, int64_t src, int64_t dst) override;

  void ClearState(int32_t states, int64_t slot) override {
    if (!error_.ok()) return;
    StateStore& s = states_[static_cast<size_t>(states)];
    std::memset(s.data.data() + static_cast<size_t>(slot) * s.slot_bytes, 0, s.slot_bytes);
  }

  void Download(Tensor t, float* host) override {
    if (!error_.ok()) return;
    Profile prof(this, kDownload);
    std::memcpy(host, t.data, static_cast<size_t>(t.rows * t.cols) * 4);
  }

  void CheckFinite(Tensor x, bool* finite) override;

  Status Synchronize() override {
    Status s = std::move(error_);
    error_ = Status::Ok();
    return s;
  }

  // A plain streaming read of the bound matrices, the bytes a decode step reads (so for a model that
  // fits in the caches, the caches' rate, as its decode sees), each thread its slice of every matrix
  // with 4 running sums to keep loads in flight; the best pass after one that warms up. No memory is
  // allocated, so the peak RSS a benchmark reports stays the model's.
  Result<double> MeasureBandwidth(double min_seconds) override;

 private:
  // Element-wise and row-wise work is split across the pool once it is big enough to pay for the
  // hand-off (a decode step of one sequence stays on the calling thread). Each element or row is
  // computed the same way wherever the split falls.
  static constexpr int64_t kMinParallelElements = 16384;
  void Elements(int64_t n, FunctionRef<void(int64_t, int64_t)> fn) {
    if (n < kMinParallelElements || pool_.size() == 1) return fn(0, n);
    pool_.ParallelForDynamic(n, 1024, fn);
  }
  void Rows(int64_t rows, int64_t cols, FunctionRef<void(int64_t, int64_t)> fn) {
    if (rows * cols < kMinParallelElements || rows < 2 || pool_.size() == 1) return fn(0, rows);
    pool_.ParallelForDynamic(rows, 1, fn);
  }

  void Fail(Status s) {
    if (error_.ok()) error_ = std::move(s);
  }
  float* StateOf(int32_t states, int32_t seq, size_t offset) {
    StateStore& s = states_[static_cast<size_t>(states)];
    const auto slot = static_cast<size_t>(state_slot_[static_cast<size_t>(seq)]);
    return reinterpret_cast<float*>(s.data.data() + slot * s.slot_bytes + offset);
  }
  int32_t SeqPage(int64_t row, int64_t index) const {
    const int32_t seq = row_seq_[static_cast<size_t>(row)];
    return pages_[static_cast<size_t>(page_begin_[static_cast<size_t>(seq)] + index)];
  }

  // Times one op when profiling.
  // One product of matrix w over `rows` activation rows in the per-shape profile table.
  void CountMatMul(BoundWeight w, int64_t rows, double ns);

  struct Profile {
    Profile(CpuBackend* b, int op) : b_(b->profile_ ? b : nullptr), op_(op), t0_(b_ ? NowNanos() : 0) {}
    ~Profile() {
      if (b_ == nullptr) return;
      b_->op_ns_[op_] += static_cast<double>(NowNanos() - t0_);
      ++b_->op_calls_[op_];
    }
    CpuBackend* b_;
    int op_;
    int64_t t0_;
  };

  ThreadPool pool_;
  const KernelTable& k_;
  bool profile_ = ProfilingEnabled();
  double op_ns_[kNumProfiledOps] = {};
  int64_t op_calls_[kNumProfiledOps] = {};
  struct MatMulTime {
    double ns = 0;
    int64_t calls = 0;
  };
  std::vector<std::array<MatMulTime, 2>> matmul_time_;
  int64_t quantize_ns_ = 0;  // of MatMul's time, quantizing activations
  Status error_ = Status::Ok();
  std::vector<QuantMatrix> matrices_;
  std::vector<const float*> vectors_;
  std::vector<Embedding> embeddings_;
  std::vector<RopeSpec> ropes_;
  std::vector<DeltaNetSpec> delta_nets_;
  std::vector<MoeSpec> moes_;
  std::unordered_map<float*, std::unique_ptr<float, Aligned>> buffers_;
  std::vector<KvStore> kv_;
  std::vector<StateStore> states_;
  // The current batch.
  std::vector<int32_t> tokens_, positions_, row_seq_, page_begin_, pages_, out_rows_, state_slot_;
  int64_t max_ctx_ = 0;
  struct SeqRows {
    int32_t seq;
    int64_t row0, n;
  };
  std::vector<SeqRows> seq_rows_;
  // Scratch.
  std::vector<const uint16_t*> k_ptrs_, v_ptrs_;
  std::vector<float> scores_, rule_scratch_;
  Scratch moe_logits_, moe_x_, moe_g_, moe_u_, moe_out_, moe_y_, moe_shared_;
  std::vector<int32_t> moe_ids_;
  std::vector<float> moe_weights_;
  std::vector<int64_t> moe_slots_, moe_first_;
};

}  // namespace fak::cpu::detail
