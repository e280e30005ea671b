#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <new>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backends/cpu/attention.h"  // HeadKv
#include "backends/cpu/delta_net.h"  // DeltaNetConvChannels, DeltaNetHead, GatedRmsNorm
#include "backends/cpu/kernels.h"    // Kernels
#include "backends/cpu/matmul.h"     // QuantMatrix, MatMul
#include "backends/cpu/moe.h"        // RouteRow, GroupByExpert, CombineRow
#include "backends/cpu/ops.h"        // RmsNorm, Rope, SiluMul, EmbeddingRow, FloatToHalf
#include "backends/cpu/packed.h"     // PackMatrix, PackedBytes
#include "core/thread_pool.h"
#include "core/timer.h"

namespace fak::cpu {
namespace {

class CpuLayout final : public WeightLayout {
 public:
  bool Repacks(GgmlType type, int64_t cols) const override {
    return PreferPackedLayout(type) && PackedBytes(type, 1, cols) > 0;
  }
  size_t Bytes(GgmlType type, int64_t rows, int64_t cols) const override {
    return PackedBytes(type, rows, cols);
  }
  int64_t GroupRows() const override { return kPackRows; }
  size_t GroupBytes(GgmlType type, int64_t cols) const override { return PackedGroupBytes(type, cols); }
  Status Convert(GgmlType type, const uint8_t* rows, int64_t n, int64_t cols, uint8_t* group) const override {
    return PackMatrix(type, rows, n, cols, group);
  }
};

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
constexpr const char* kOpNames[] = {"Embed",    "MatMul", "RmsNorm",      "AddRow",       "Add",
                                    "SiluMul",  "Rope",   "KvWrite",      "Attention",    "GatherOutRows",
                                    "Download", "Gates",  "DeltaNetConv", "DeltaNetRule", "Moe (route+sum)"};

// FAK_PROFILE=1: time per op kind, printed to stderr when the backend is destroyed.
bool ProfilingEnabled() {
  const char* v = std::getenv("FAK_PROFILE");
  return v != nullptr && v[0] == '1';
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& o)
      : pool_(o.threads > 0 ? o.threads : DefaultThreadCount(), o.pin), k_(Kernels()) {}

  ~CpuBackend() override {
    if (!profile_) return;
    double total = 0;
    for (double t : op_ns_) total += t;
    std::fprintf(stderr, "cpu backend profile (%.1f ms in ops):\n", total * 1e-6);
    for (int i = 0; i < kNumProfiledOps; ++i) {
      if (op_calls_[i] == 0) continue;
      std::fprintf(stderr, "  %-14s %9.1f ms %5.1f%%  %8lld calls\n", kOpNames[i], op_ns_[i] * 1e-6,
                   100.0 * op_ns_[i] / total, static_cast<long long>(op_calls_[i]));
    }
    std::fprintf(stderr, "  MatMul activation quantization %9.1f ms %5.1f%%\n",
                 static_cast<double>(quantize_ns_) * 1e-6, 100.0 * static_cast<double>(quantize_ns_) / total);
    // Matrix products by shape (weight rows x columns; prompt passes and decode steps apart).
    std::map<std::tuple<int64_t, int64_t, bool>, std::pair<double, int64_t>> by_shape;
    for (size_t i = 0; i < matrices_.size() && i < matmul_time_.size(); ++i) {
      for (int multi = 0; multi < 2; ++multi) {
        const MatMulTime& t = matmul_time_[i][multi];
        if (t.calls == 0) continue;
        auto& [ns, calls] = by_shape[{matrices_[i].rows, matrices_[i].cols, multi == 1}];
        ns += t.ns;
        calls += t.calls;
      }
    }
    for (const auto& [shape, t] : by_shape) {
      std::fprintf(stderr, "  MatMul %6lld x %-6lld %-7s %9.1f ms %5.1f%%  %8lld calls\n",
                   static_cast<long long>(std::get<0>(shape)), static_cast<long long>(std::get<1>(shape)),
                   std::get<2>(shape) ? "rows>1" : "rows=1", t.first * 1e-6, 100.0 * t.first / total,
                   static_cast<long long>(t.second));
    }
  }

  std::string name() const override { return "cpu"; }
  const std::string& PoolStartError() const { return pool_.start_error(); }
  int threads() const override { return pool_.size(); }
  const WeightLayout& layout() const override { return CpuWeightLayout(); }

  Result<BoundWeight> BindMatrix(const Weight& w) override {
    if (!w.present()) return InvalidArgument("binding an absent matrix");
    FAK_ASSIGN_OR_RETURN(QuantMatrix m, w.packed ? MakePackedQuantMatrix(w.type, w.data, w.rows, w.cols)
                                                 : MakeQuantMatrix(w.type, w.data, w.rows, w.cols));
    matrices_.push_back(m);
    return BoundWeight{static_cast<int32_t>(matrices_.size() - 1), w.rows, w.cols};
  }

  Result<BoundWeight> BindVector(const Weight& w) override {
    if (!w.present() || w.type != GgmlType::kF32 || w.packed) {
      return InvalidArgument("a vector weight must be f32 rows");
    }
    vectors_.push_back(w.f32());
    return BoundWeight{static_cast<int32_t>(vectors_.size() - 1), w.rows, w.cols};
  }

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

  Result<int32_t> BindDeltaNet(const DeltaNetSpec& d) override {
    if (d.n_k_head <= 0 || d.n_v_head <= 0 || d.k_dim <= 0 || d.v_dim <= 0 || d.n_v_head % d.n_k_head != 0) {
      return InvalidArgument("Gated-DeltaNet geometry: {} key and {} value heads of {} and {}", d.n_k_head,
                             d.n_v_head, d.k_dim, d.v_dim);
    }
    if (d.conv_kernel < 1 || d.conv_kernel > 16) {
      return Unsupported("Gated-DeltaNet convolution of width {} (fak runs 1 to 16)", d.conv_kernel);
    }
    delta_nets_.push_back(d);
    return static_cast<int32_t>(delta_nets_.size() - 1);
  }

  bool RunsMoe() const override { return true; }

  Result<int32_t> BindMoe(const MoeSpec& m) override {
    if (m.n_expert <= 0 || m.n_used <= 0 || m.n_used > m.n_expert) {
      return InvalidArgument("mixture of experts: {} of {} experts per token", m.n_used, m.n_expert);
    }
    const auto n = static_cast<size_t>(m.n_expert);
    if (m.gate.size() != n || m.up.size() != n || m.down.size() != n) {
      return InvalidArgument("mixture of experts: {} experts but {}/{}/{} gate/up/down matrices", n,
                             m.gate.size(), m.up.size(), m.down.size());
    }
    if (!m.router.present() || m.router.rows != m.n_expert) {
      return InvalidArgument("mixture of experts: the router has {} rows for {} experts", m.router.rows, n);
    }
    const int64_t d = m.router.cols;
    auto ffn_ok = [d](BoundWeight g, BoundWeight u, BoundWeight w) {
      return g.present() && u.present() && w.present() && g.cols == d && u.rows == g.rows && u.cols == d &&
             w.rows == d && w.cols == g.rows;
    };
    for (size_t e = 0; e < n; ++e) {
      if (!ffn_ok(m.gate[e], m.up[e], m.down[e])) {
        return InvalidArgument("mixture of experts: expert {}'s matrices do not fit a model width of {}", e,
                               d);
      }
    }
    const bool shared = m.shared_gate.present() || m.shared_up.present() || m.shared_down.present();
    if (shared && !ffn_ok(m.shared_gate, m.shared_up, m.shared_down)) {
      return InvalidArgument(
          "mixture of experts: the shared expert's matrices do not fit a model width of {}", d);
    }
    if (m.shared_scale.present() && (!shared || m.shared_scale.cols != d)) {
      return InvalidArgument("mixture of experts: a shared-expert gate of {} values for a width of {}",
                             m.shared_scale.cols, d);
    }
    moes_.push_back(m);
    return static_cast<int32_t>(moes_.size() - 1);
  }

  Result<Tensor> Alloc(int64_t rows, int64_t cols) override {
    if (rows <= 0 || cols <= 0) return InvalidArgument("tensor shape ({}, {}) is empty", rows, cols);
    const size_t bytes = (static_cast<size_t>(rows) * static_cast<size_t>(cols) * 4 + 63) / 64 * 64;
    float* p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (p == nullptr) return OutOfRange("cannot allocate a ({}, {}) f32 tensor", rows, cols);
    std::memset(p, 0, bytes);
    buffers_.emplace(p, std::unique_ptr<float, Aligned>(p));
    return Tensor{p, rows, cols};
  }

  void Free(Tensor t) override { buffers_.erase(t.data); }

  Result<int32_t> CreateKv(const KvGeometry& g, int64_t max_pages) override {
    if (g.n_layer <= 0 || g.n_kv_head <= 0 || g.head_dim <= 0 || g.page_tokens <= 0 || max_pages <= 0) {
      return InvalidArgument("KV geometry has an empty dimension");
    }
    KvStore s;
    s.g = g;
    s.max_pages = max_pages;
    s.block_units = static_cast<size_t>(g.page_tokens * g.head_dim * (g.f32 ? 2 : 1));
    s.page_units = 2 * static_cast<size_t>(g.n_layer * g.n_kv_head) * s.block_units;
    kv_.push_back(std::move(s));
    return static_cast<int32_t>(kv_.size() - 1);
  }

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

  Result<int32_t> CreateStates(size_t slot_bytes, int64_t n_slots) override {
    if (slot_bytes == 0 || n_slots <= 0) return InvalidArgument("state store with no slots");
    StateStore s;
    s.slot_bytes = slot_bytes;
    const size_t total = slot_bytes * static_cast<size_t>(n_slots);
    if (total / static_cast<size_t>(n_slots) != slot_bytes || total > (size_t{1} << 40)) {
      return OutOfRange("{} recurrent-state slots of {} bytes do not fit in memory", n_slots, slot_bytes);
    }
    try {
      s.data.assign(total, 0);
    } catch (const std::bad_alloc&) {
      return OutOfRange("cannot allocate {} recurrent-state slots of {:.1f} MiB", n_slots,
                        static_cast<double>(slot_bytes) / 1048576.0);
    }
    states_.push_back(std::move(s));
    return static_cast<int32_t>(states_.size() - 1);
  }

  void SetBatch(const BatchPlan& b) override {
    tokens_.assign(b.tokens.begin(), b.tokens.end());
    positions_.assign(b.positions.begin(), b.positions.end());
    row_seq_.assign(b.row_seq.begin(), b.row_seq.end());
    page_begin_.assign(b.page_begin.begin(), b.page_begin.end());
    pages_.assign(b.pages.begin(), b.pages.end());
    out_rows_.assign(b.out_rows.begin(), b.out_rows.end());
    state_slot_.assign(b.state_slot.begin(), b.state_slot.end());
    max_ctx_ = b.max_ctx;
    // Each sequence's rows: consecutive, in position order (the runtime builds batches so).
    seq_rows_.clear();
    for (int64_t r = 0; r < static_cast<int64_t>(row_seq_.size()); ++r) {
      if (r == 0 || row_seq_[static_cast<size_t>(r)] != row_seq_[static_cast<size_t>(r - 1)]) {
        seq_rows_.push_back({row_seq_[static_cast<size_t>(r)], r, 0});
      }
      ++seq_rows_.back().n;
    }
  }

  void Embed(BoundWeight table, Tensor out) override {
    if (!error_.ok()) return;
    Profile prof(this, kEmbed);
    const Embedding& e = embeddings_[static_cast<size_t>(table.id)];
    for (size_t r = 0; r < tokens_.size(); ++r) {
      Status s = EmbeddingRow(e.table, tokens_[r], out.data + static_cast<int64_t>(r) * out.cols, e.as_type);
      if (!s.ok()) return Fail(std::move(s));
    }
  }

  void MatMul(BoundWeight w, Tensor x, Tensor y) override {
    if (!error_.ok()) return;
    const int64_t t0 = profile_ ? NowNanos() : 0;
    {
      Profile prof(this, kMatMul);
      Status s = cpu::MatMul(matrices_[static_cast<size_t>(w.id)], x.data, x.rows, y.data, pool_, &k_,
                             profile_ ? &quantize_ns_ : nullptr);
      if (!s.ok()) Fail(std::move(s));
    }
    if (profile_) CountMatMul(w, x.rows, static_cast<double>(NowNanos() - t0));
  }

  void MatMulSwiGLU(BoundWeight gate, BoundWeight up, Tensor x, Tensor g, Tensor u) override {
    if (!error_.ok()) return;
    const QuantMatrix& mg = matrices_[static_cast<size_t>(gate.id)];
    const QuantMatrix& mu = matrices_[static_cast<size_t>(up.id)];
    if (!cpu::CanFuseSwiGLU(mg, mu)) return Backend::MatMulSwiGLU(gate, up, x, g, u);
    const int64_t t0 = profile_ ? NowNanos() : 0;
    {
      Profile prof(this, kMatMul);
      Status s = cpu::MatMulSwiGLU(mg, mu, x.data, x.rows, g.data, u.data, pool_, &k_,
                                   profile_ ? &quantize_ns_ : nullptr);
      if (!s.ok()) Fail(std::move(s));
    }
    if (profile_) {  // half to each matrix, one call each: the per-shape table reads as unfused
      const double half = static_cast<double>(NowNanos() - t0) / 2;
      CountMatMul(gate, x.rows, half);
      CountMatMul(up, x.rows, half);
    }
  }

  void RmsNorm(Tensor x, BoundWeight w, Tensor y, float eps) override {
    if (!error_.ok()) return;
    Profile prof(this, kRmsNorm);
    const float* wv = vectors_[static_cast<size_t>(w.id)];
    Rows(x.rows, x.cols, [&](int64_t r0, int64_t r1) {
      cpu::RmsNorm(x.data + r0 * x.cols, wv, y.data + r0 * y.cols, r1 - r0, x.cols, eps);
    });
  }

  void AddRow(Tensor x, BoundWeight b) override {
    if (!error_.ok()) return;
    Profile prof(this, kAddRow);
    const float* bias = vectors_[static_cast<size_t>(b.id)];
    Rows(x.rows, x.cols,
         [&](int64_t r0, int64_t r1) { AddBias(x.data + r0 * x.cols, bias, r1 - r0, x.cols); });
  }

  void Add(Tensor x, Tensor y) override {
    if (!error_.ok()) return;
    Profile prof(this, kAdd);
    Elements(x.rows * x.cols, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) x.data[i] += y.data[i];
    });
  }

  void SiluMul(Tensor g, Tensor u) override {
    if (!error_.ok()) return;
    Profile prof(this, kSiluMul);
    Elements(g.rows * g.cols,
             [&](int64_t i0, int64_t i1) { k_.silu_mul(g.data + i0, u.data + i0, i1 - i0); });
  }

  void Rope(Tensor x, int64_t head_dim, int32_t rope) override {
    if (!error_.ok()) return;
    Profile prof(this, kRope);
    const RopeSpec& r = ropes_[static_cast<size_t>(rope)];
    const int64_t rot_dim = static_cast<int64_t>(r.inv_freq.size()) * 2;
    Rows(x.rows, x.cols, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        cpu::Rope(x.data + t * x.cols, x.cols / head_dim, head_dim, rot_dim,
                  positions_[static_cast<size_t>(t)], r.inv_freq.data(), r.neox, r.attn_factor);
      }
    });
  }

  void KvWrite(int32_t kv, int64_t layer, Tensor k, Tensor v) override {
    if (!error_.ok()) return;
    Profile prof(this, kKvWrite);
    const KvStore& s = kv_[static_cast<size_t>(kv)];
    const int64_t hd = s.g.head_dim, pt = s.g.page_tokens;
    // Rows write disjoint slots (one position each), so they split across the pool like any row op.
    Rows(k.rows, 2 * k.cols, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t pos = positions_[static_cast<size_t>(r)];
        const int32_t page = SeqPage(r, pos / pt);
        const int64_t off = (pos % pt) * hd;
        for (int64_t h = 0; h < s.g.n_kv_head; ++h) {
          const float* ks = k.data + r * k.cols + h * hd;
          const float* vs = v.data + r * v.cols + h * hd;
          if (s.g.f32) {
            std::memcpy(s.Block(page, layer, h, 0) + off * 2, ks, static_cast<size_t>(hd) * 4);
            std::memcpy(s.Block(page, layer, h, 1) + off * 2, vs, static_cast<size_t>(hd) * 4);
            continue;
          }
          uint16_t* kd = s.Block(page, layer, h, 0) + off;
          uint16_t* vd = s.Block(page, layer, h, 1) + off;
          for (int64_t i = 0; i < hd; ++i) {
            kd[i] = FloatToHalf(ks[i]);
            vd[i] = FloatToHalf(vs[i]);
          }
        }
      }
    });
  }

  void Attention(int32_t kv, int64_t layer, Tensor q, float scale, Tensor out) override {
    if (!error_.ok()) return;
    Profile prof(this, kAttention);
    const KvStore& s = kv_[static_cast<size_t>(kv)];
    const int64_t hd = s.g.head_dim, nkv = s.g.n_kv_head, nh = q.cols / hd, group = nh / nkv;
    // Page pointers of this layer, (kv head, page slot) for every page slot of the batch's tables.
    const size_t n_slots = pages_.size();
    k_ptrs_.resize(static_cast<size_t>(nkv) * n_slots);
    v_ptrs_.resize(k_ptrs_.size());
    for (int64_t h = 0; h < nkv; ++h) {
      for (size_t p = 0; p < n_slots; ++p) {
        k_ptrs_[h * n_slots + p] = s.Block(pages_[p], layer, h, 0);
        v_ptrs_[h * n_slots + p] = s.Block(pages_[p], layer, h, 1);
      }
    }
    const int64_t T = q.rows;
    // Work items: (row, KV head) with its query heads together, or, when that leaves threads idle,
    // (row, query head). A head's result is the same bits either way (AttendGroupFn's contract), and
    // each item reads only the cache, so neither the batch around a row nor how its prompt was
    // chunked changes its result.
    const bool grouped = T * nkv >= 2 * pool_.size();
    const int64_t per_item = grouped ? group : 1;
    const int64_t n_items = grouped ? T * nkv : T * nh;
    const int64_t scratch = AttendScratchFloats(per_item, hd, max_ctx_);
    const size_t scores_size = static_cast<size_t>(pool_.size()) * static_cast<size_t>(scratch);
    if (scores_.size() < scores_size) scores_.resize(scores_size);  // grow only: no refill per call
    const AttendGroupFn attend = k_.attend_group;
    pool_.Run([&](int tid, int nt) {
      float* sc = &scores_[static_cast<size_t>(tid) * static_cast<size_t>(scratch)];
      for (int64_t item = tid; item < n_items; item += nt) {
        const int64_t t = grouped ? item / nkv : item / nh;
        const int64_t h0 = grouped ? (item % nkv) * group : item % nh;  // first query head
        const int64_t g = h0 / group;
        const size_t first =
            static_cast<size_t>(page_begin_[static_cast<size_t>(row_seq_[static_cast<size_t>(t)])]);
        HeadKv hk{&k_ptrs_[g * n_slots + first], &v_ptrs_[g * n_slots + first], s.g.page_tokens, s.g.f32};
        attend(q.data + t * q.cols + h0 * hd, per_item, hd, hk, positions_[static_cast<size_t>(t)] + 1, scale,
               sc, out.data + t * out.cols + h0 * hd);
      }
    });
  }

  void SigmoidMul(Tensor x, Tensor g) override {
    if (!error_.ok()) return;
    Profile prof(this, kGates);
    Elements(x.rows * x.cols, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) x.data[i] *= 1.0f / (1.0f + std::exp(-g.data[i]));
    });
  }

  void SplitHeads(Tensor x, int64_t head_dim, Tensor a, Tensor b) override {
    if (!error_.ok()) return;
    Profile prof(this, kGates);
    const int64_t heads = x.rows * x.cols / (2 * head_dim);
    const size_t bytes = static_cast<size_t>(head_dim) * 4;
    for (int64_t h = 0; h < heads; ++h) {
      std::memcpy(a.data + h * head_dim, x.data + 2 * h * head_dim, bytes);
      std::memcpy(b.data + h * head_dim, x.data + (2 * h + 1) * head_dim, bytes);
    }
  }

  void GatedRmsNorm(Tensor x, BoundWeight w, Tensor z, float eps) override {
    if (!error_.ok()) return;
    Profile prof(this, kGates);
    const float* wv = vectors_[static_cast<size_t>(w.id)];
    Rows(x.rows, x.cols, [&](int64_t r0, int64_t r1) {
      cpu::GatedRmsNorm(x.data + r0 * x.cols, wv, z.data + r0 * z.cols, x.data + r0 * x.cols, r1 - r0, x.cols,
                        eps);
    });
  }

  void DeltaNetConv(int32_t states, int32_t dn, Tensor x, BoundWeight conv) override {
    if (!error_.ok()) return;
    Profile prof(this, kDeltaNetConv);
    const DeltaNetSpec& d = delta_nets_[static_cast<size_t>(dn)];
    const float* w = vectors_[static_cast<size_t>(conv.id)];
    const int64_t cd = d.conv_dim();
    for (const SeqRows& sr : seq_rows_) {
      float* window = StateOf(states, sr.seq, d.state_offset);
      float* xs = x.data + sr.row0 * cd;
      if (sr.n * cd < kMinParallelElements || pool_.size() == 1) {
        DeltaNetConvChannels(d, xs, sr.n, w, window, 0, cd);
        continue;
      }
      pool_.ParallelForDynamic(
          cd, 64, [&](int64_t c0, int64_t c1) { DeltaNetConvChannels(d, xs, sr.n, w, window, c0, c1); });
    }
  }

  void DeltaNetRule(int32_t states, int32_t dn, Tensor x, Tensor b, Tensor a, BoundWeight ssm_a,
                    BoundWeight dt_bias, Tensor out) override {
    if (!error_.ok()) return;
    Profile prof(this, kDeltaNetRule);
    const DeltaNetSpec& d = delta_nets_[static_cast<size_t>(dn)];
    const float* av = vectors_[static_cast<size_t>(ssm_a.id)];
    const float* dtv = vectors_[static_cast<size_t>(dt_bias.id)];
    const int64_t nv = d.n_v_head, cd = d.conv_dim(), head_floats = d.k_dim * d.v_dim;
    const int64_t n_items = static_cast<int64_t>(seq_rows_.size()) * nv;
    const int64_t scratch = 2 * (d.k_dim + d.v_dim);
    if (rule_scratch_.size() < static_cast<size_t>(pool_.size() * scratch)) {
      rule_scratch_.resize(static_cast<size_t>(pool_.size() * scratch));
    }
    // Work items: (sequence, value head); each runs its rows in order on one thread.
    auto item = [&](int64_t i, float* sc) {
      const SeqRows& sr = seq_rows_[static_cast<size_t>(i / nv)];
      const int64_t h = i % nv;
      float* s = StateOf(states, sr.seq, d.state_offset + d.ConvStateBytes()) + h * head_floats;
      DeltaNetHead(d, h, x.data + sr.row0 * cd, b.data + sr.row0 * b.cols, a.data + sr.row0 * a.cols, sr.n,
                   av[h], dtv[h], s, out.data + sr.row0 * out.cols, sc);
    };
    if (pool_.size() == 1 || n_items == 1) {
      for (int64_t i = 0; i < n_items; ++i) item(i, rule_scratch_.data());
      return;
    }
    pool_.Run([&](int tid, int nt) {
      for (int64_t i = tid; i < n_items; i += nt) item(i, &rule_scratch_[static_cast<size_t>(tid * scratch)]);
    });
  }

  // Routing, then each chosen expert over the rows that chose it (gathered into one product, so its
  // weights are read once per batch), each (row, rank) result kept apart and summed per row in rank
  // order: a row's bits do not depend on which rows share the batch (the products are row-invariant).
  void MoeFfn(int32_t id, Tensor x, Tensor out) override {
    if (!error_.ok()) return;
    const MoeSpec& m = moes_[static_cast<size_t>(id)];
    const int64_t n = x.rows, d = x.cols, n_exp = m.n_expert, k = m.n_used;
    const int64_t widest = std::max(m.gate[0].rows, m.shared_gate.present() ? m.shared_gate.rows : 0);
    float* logits = moe_logits_.Get(n * n_exp);
    float* y = moe_y_.Get(n * k * d);  // (row, rank) results
    float* xe = moe_x_.Get(n * d);
    float* ge = moe_g_.Get(n * widest);
    float* ue = moe_u_.Get(n * widest);
    float* ye = moe_out_.Get(n * d);
    float* shared = m.shared_gate.present() ? moe_shared_.Get(n * d) : nullptr;
    if (!logits || !y || !xe || !ge || !ue || !ye || (m.shared_gate.present() && !shared)) {
      return Fail(OutOfRange("mixture of experts: no memory for the scratch of {} rows", n));
    }
    MatMul(m.router, x, Tensor{logits, n, n_exp});
    if (!error_.ok()) return;
    moe_ids_.resize(static_cast<size_t>(n * k));
    moe_weights_.resize(static_cast<size_t>(n * k));
    {
      Profile prof(this, kMoe);
      for (int64_t r = 0; r < n; ++r) {
        RouteRow(logits + r * n_exp, n_exp, k, m.norm_top_k, &moe_ids_[static_cast<size_t>(r * k)],
                 &moe_weights_[static_cast<size_t>(r * k)]);
      }
    }
    GroupByExpert(moe_ids_, n_exp, &moe_first_, &moe_slots_);
    for (int64_t e = 0; e < n_exp; ++e) {
      const int64_t first = moe_first_[static_cast<size_t>(e)];
      const int64_t rows = moe_first_[static_cast<size_t>(e) + 1] - first;
      if (rows == 0) continue;
      const int64_t* slots = &moe_slots_[static_cast<size_t>(first)];
      const int64_t ff = m.gate[static_cast<size_t>(e)].rows;
      for (int64_t i = 0; i < rows; ++i) {
        std::memcpy(xe + i * d, x.data + slots[i] / k * x.cols, static_cast<size_t>(d) * 4);
      }
      const Tensor g{ge, rows, ff};
      MatMulSwiGLU(m.gate[static_cast<size_t>(e)], m.up[static_cast<size_t>(e)], Tensor{xe, rows, d}, g,
                   Tensor{ue, rows, ff});
      MatMul(m.down[static_cast<size_t>(e)], g, Tensor{ye, rows, d});
      for (int64_t i = 0; i < rows; ++i) {
        std::memcpy(y + slots[i] * d, ye + i * d, static_cast<size_t>(d) * 4);
      }
    }
    if (shared != nullptr) {
      const int64_t ff = m.shared_gate.rows;
      const Tensor g{ge, n, ff};
      MatMulSwiGLU(m.shared_gate, m.shared_up, x, g, Tensor{ue, n, ff});
      MatMul(m.shared_down, g, Tensor{shared, n, d});
    }
    if (!error_.ok()) return;
    Profile prof(this, kMoe);
    const float* scale_w =
        m.shared_scale.present() ? vectors_[static_cast<size_t>(m.shared_scale.id)] : nullptr;
    Rows(n, d, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float scale = shared == nullptr    ? 0.0f
                            : scale_w == nullptr ? 1.0f
                                                 : SharedExpertGate(x.data + r * x.cols, scale_w, d);
        CombineRow(y + r * k * d, &moe_weights_[static_cast<size_t>(r * k)], k, d,
                   shared == nullptr ? nullptr : shared + r * d, scale, out.data + r * out.cols);
      }
    });
  }

  void GatherOutRows(Tensor x, Tensor out) override {
    if (!error_.ok()) return;
    Profile prof(this, kGatherOutRows);
    for (size_t i = 0; i < out_rows_.size(); ++i) {
      std::memcpy(out.data + static_cast<int64_t>(i) * out.cols, x.data + out_rows_[i] * x.cols,
                  static_cast<size_t>(x.cols) * 4);
    }
  }

  void CopyKvPage(int32_t kv, int32_t src, int32_t dst) override {
    if (!error_.ok()) return;
    const KvStore& s = kv_[static_cast<size_t>(kv)];
    std::memcpy(s.pages[static_cast<size_t>(dst)].get(), s.pages[static_cast<size_t>(src)].get(),
                s.page_units * 2);
  }

  void CopyState(int32_t states, int64_t src, int64_t dst) override {
    if (!error_.ok()) return;
    StateStore& s = states_[static_cast<size_t>(states)];
    std::memcpy(s.data.data() + static_cast<size_t>(dst) * s.slot_bytes,
                s.data.data() + static_cast<size_t>(src) * s.slot_bytes, s.slot_bytes);
  }

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

  void CheckFinite(Tensor x, bool* finite) override {
    if (!error_.ok()) return;
    Profile prof(this, kDownload);
    std::atomic<bool> all{true};
    Elements(x.rows * x.cols, [&](int64_t begin, int64_t end) {
      uint32_t bad = 0;  // no early exit, so the loop vectorizes
      for (int64_t i = begin; i < end; ++i) {
        uint32_t bits;
        std::memcpy(&bits, &x.data[i], 4);
        bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
      }
      if (bad != 0) all.store(false, std::memory_order_relaxed);
    });
    *finite = all.load();
  }

  Status Synchronize() override {
    Status s = std::move(error_);
    error_ = Status::Ok();
    return s;
  }

  // A plain streaming read of the bound matrices, the bytes a decode step reads (so for a model that
  // fits in the caches, the caches' rate, as its decode sees), each thread its slice of every matrix
  // with 4 running sums to keep loads in flight; the best pass after one that warms up. No memory is
  // allocated, so the peak RSS a benchmark reports stays the model's.
  Result<double> MeasureBandwidth(double min_seconds) override {
    size_t total = 0;
    for (const QuantMatrix& m : matrices_) total += static_cast<size_t>(m.rows) * m.row_bytes;
    if (total == 0) return Unsupported("bandwidth measurement: no matrices bound");
    std::vector<uint64_t> sink(static_cast<size_t>(pool_.size()));
    auto pass = [&] {
      pool_.Run([&](int i, int n) {
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (const QuantMatrix& m : matrices_) {
          const size_t bytes = static_cast<size_t>(m.rows) * m.row_bytes;
          const size_t b = bytes * static_cast<size_t>(i) / static_cast<size_t>(n) / 64 * 64;
          const size_t e = bytes * static_cast<size_t>(i + 1) / static_cast<size_t>(n) / 64 * 64;
          for (size_t k = b; k + 32 <= e; k += 32) {
            uint64_t v[4];
            std::memcpy(v, m.data + k, 32);
            s0 += v[0], s1 ^= v[1], s2 += v[2], s3 ^= v[3];
          }
        }
        sink[static_cast<size_t>(i)] += s0 + s1 + s2 + s3;
      });
    };
    pass();
    double best = 1e30;
    const Timer total_time;
    do {
      const Timer t;
      pass();
      best = std::min(best, t.Seconds());
    } while (total_time.Seconds() < min_seconds);
    uint64_t all = 0;
    for (const uint64_t v : sink) all += v;
    if (all == 1) std::fputs("", stderr);  // keeps the sums, so the reads are not optimized away
    return static_cast<double>(total) / best * 1e-9;
  }

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
  void CountMatMul(BoundWeight w, int64_t rows, double ns) {
    matmul_time_.resize(matrices_.size());
    MatMulTime& t = matmul_time_[static_cast<size_t>(w.id)][rows > 1 ? 1 : 0];
    t.ns += ns;
    ++t.calls;
  }

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
  int64_t quantize_ns_ =
      0;  // of MatMul's time, quantizing activations  // per bound matrix: decode steps, prompt passes
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

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

std::string StartError(const Backend& cpu_backend) {
  const auto* be = dynamic_cast<const CpuBackend*>(&cpu_backend);
  return be != nullptr ? be->PoolStartError() : std::string();
}

const WeightLayout& CpuWeightLayout() {
  static const CpuLayout layout;
  return layout;
}

}  // namespace fak::cpu
