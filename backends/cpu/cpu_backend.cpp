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
#include "backends/cpu/cpu_backend_impl.h"
#include "backends/cpu/kernels.h"  // Kernels
#include "backends/cpu/matmul.h"   // QuantMatrix, MatMul
#include "backends/cpu/ops.h"      // RmsNorm, Rope, SiluMul, EmbeddingRow, FloatToHalf
#include "backends/cpu/packed.h"   // PackMatrix, PackedBytes
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

constexpr const char* kOpNames[] = {"Embed",    "MatMul", "RmsNorm",      "AddRow",       "Add",
                                    "SiluMul",  "Rope",   "KvWrite",      "Attention",    "GatherOutRows",
                                    "Download", "Gates",  "DeltaNetConv", "DeltaNetRule", "Moe (route+sum)"};

}  // namespace

namespace detail {

// FAK_PROFILE=1: time per op kind, printed to stderr when the backend is destroyed.
bool ProfilingEnabled() {
  const char* v = std::getenv("FAK_PROFILE");
  return v != nullptr && v[0] == '1';
}

CpuBackend::~CpuBackend() {
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

Result<BoundWeight> CpuBackend::BindMatrix(const Weight& w) {
  if (!w.present()) return InvalidArgument("binding an absent matrix");
  FAK_ASSIGN_OR_RETURN(QuantMatrix m, w.packed ? MakePackedQuantMatrix(w.type, w.data, w.rows, w.cols)
                                               : MakeQuantMatrix(w.type, w.data, w.rows, w.cols));
  matrices_.push_back(m);
  return BoundWeight{static_cast<int32_t>(matrices_.size() - 1), w.rows, w.cols};
}

Result<BoundWeight> CpuBackend::BindVector(const Weight& w) {
  if (!w.present() || w.type != GgmlType::kF32 || w.packed) {
    return InvalidArgument("a vector weight must be f32 rows");
  }
  vectors_.push_back(w.f32());
  return BoundWeight{static_cast<int32_t>(vectors_.size() - 1), w.rows, w.cols};
}

Result<Tensor> CpuBackend::Alloc(int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return InvalidArgument("tensor shape ({}, {}) is empty", rows, cols);
  const size_t bytes = (static_cast<size_t>(rows) * static_cast<size_t>(cols) * 4 + 63) / 64 * 64;
  float* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (p == nullptr) return OutOfRange("cannot allocate a ({}, {}) f32 tensor", rows, cols);
  std::memset(p, 0, bytes);
  buffers_.emplace(p, std::unique_ptr<float, Aligned>(p));
  return Tensor{p, rows, cols};
}

Result<int32_t> CpuBackend::CreateKv(const KvGeometry& g, int64_t max_pages) {
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

void CpuBackend::SetBatch(const BatchPlan& b) {
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

void CpuBackend::Embed(BoundWeight table, Tensor out) {
  if (!error_.ok()) return;
  Profile prof(this, kEmbed);
  const Embedding& e = embeddings_[static_cast<size_t>(table.id)];
  for (size_t r = 0; r < tokens_.size(); ++r) {
    Status s = EmbeddingRow(e.table, tokens_[r], out.data + static_cast<int64_t>(r) * out.cols, e.as_type);
    if (!s.ok()) return Fail(std::move(s));
  }
}

void CpuBackend::MatMul(BoundWeight w, Tensor x, Tensor y) {
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

void CpuBackend::MatMuls(Tensor x, std::span<const BoundWeight> w, std::span<const Tensor> y) {
  if (!error_.ok()) return;
  constexpr size_t kMax = 8;
  if (w.size() != y.size()) {
    return Fail(InvalidArgument("matmuls: {} matrices for {} outputs", w.size(), y.size()));
  }
  if (w.size() > kMax) return Backend::MatMuls(x, w, y);
  std::array<const cpu::QuantMatrix*, kMax> mats{};
  std::array<float*, kMax> outs{};
  for (size_t i = 0; i < w.size(); ++i) {
    mats[i] = &matrices_[static_cast<size_t>(w[i].id)];
    outs[i] = y[i].data;
  }
  const int64_t t0 = profile_ ? NowNanos() : 0;
  {
    Profile prof(this, kMatMul);
    Status s =
        cpu::MatMulMany(std::span(mats.data(), w.size()), x.data, x.rows, std::span(outs.data(), w.size()),
                        pool_, &k_, profile_ ? &quantize_ns_ : nullptr);
    if (!s.ok()) Fail(std::move(s));
  }
  if (profile_) {  // split by weight bytes, one call each: the per-shape table reads as unfused
    double bytes = 0;
    for (size_t i = 0; i < w.size(); ++i) bytes += static_cast<double>(mats[i]->rows) * mats[i]->row_bytes;
    const auto ns = static_cast<double>(NowNanos() - t0);
    for (size_t i = 0; i < w.size(); ++i) {
      CountMatMul(w[i], x.rows, ns * static_cast<double>(mats[i]->rows) * mats[i]->row_bytes / bytes);
    }
  }
}

void CpuBackend::MatMulSwiGLU(BoundWeight gate, BoundWeight up, Tensor x, Tensor g, Tensor u) {
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

void CpuBackend::RmsNorm(Tensor x, BoundWeight w, Tensor y, float eps) {
  if (!error_.ok()) return;
  Profile prof(this, kRmsNorm);
  const float* wv = vectors_[static_cast<size_t>(w.id)];
  Rows(x.rows, x.cols, [&](int64_t r0, int64_t r1) {
    cpu::RmsNorm(x.data + r0 * x.cols, wv, y.data + r0 * y.cols, r1 - r0, x.cols, eps);
  });
}

void CpuBackend::AddRow(Tensor x, BoundWeight b) {
  if (!error_.ok()) return;
  Profile prof(this, kAddRow);
  const float* bias = vectors_[static_cast<size_t>(b.id)];
  Rows(x.rows, x.cols, [&](int64_t r0, int64_t r1) { AddBias(x.data + r0 * x.cols, bias, r1 - r0, x.cols); });
}

void CpuBackend::Add(Tensor x, Tensor y) {
  if (!error_.ok()) return;
  Profile prof(this, kAdd);
  Elements(x.rows * x.cols, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x.data[i] += y.data[i];
  });
}

void CpuBackend::SiluMul(Tensor g, Tensor u) {
  if (!error_.ok()) return;
  Profile prof(this, kSiluMul);
  Elements(g.rows * g.cols, [&](int64_t i0, int64_t i1) { k_.silu_mul(g.data + i0, u.data + i0, i1 - i0); });
}

void CpuBackend::Rope(Tensor x, int64_t head_dim, int32_t rope) {
  if (!error_.ok()) return;
  Profile prof(this, kRope);
  const RopeSpec& r = ropes_[static_cast<size_t>(rope)];
  const int64_t rot_dim = static_cast<int64_t>(r.inv_freq.size()) * 2;
  Rows(x.rows, x.cols, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      cpu::Rope(x.data + t * x.cols, x.cols / head_dim, head_dim, rot_dim, positions_[static_cast<size_t>(t)],
                r.inv_freq.data(), r.neox, r.attn_factor);
    }
  });
}

void CpuBackend::KvWrite(int32_t kv, int64_t layer, Tensor k, Tensor v) {
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

void CpuBackend::Attention(int32_t kv, int64_t layer, Tensor q, float scale, Tensor out) {
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

void CpuBackend::GatherOutRows(Tensor x, Tensor out) {
  if (!error_.ok()) return;
  Profile prof(this, kGatherOutRows);
  for (size_t i = 0; i < out_rows_.size(); ++i) {
    std::memcpy(out.data + static_cast<int64_t>(i) * out.cols, x.data + out_rows_[i] * x.cols,
                static_cast<size_t>(x.cols) * 4);
  }
}

void CpuBackend::CopyKvPage(int32_t kv, int32_t src, int32_t dst) {
  if (!error_.ok()) return;
  const KvStore& s = kv_[static_cast<size_t>(kv)];
  std::memcpy(s.pages[static_cast<size_t>(dst)].get(), s.pages[static_cast<size_t>(src)].get(),
              s.page_units * 2);
}

void CpuBackend::CheckFinite(Tensor x, bool* finite) {
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

Result<double> CpuBackend::MeasureBandwidth(double min_seconds) {
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

void CpuBackend::CountMatMul(BoundWeight w, int64_t rows, double ns) {
  matmul_time_.resize(matrices_.size());
  MatMulTime& t = matmul_time_[static_cast<size_t>(w.id)][rows > 1 ? 1 : 0];
  t.ns += ns;
  ++t.calls;
}

}  // namespace detail

std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options) {
  return std::make_unique<detail::CpuBackend>(options);
}

std::string StartError(const Backend& cpu_backend) {
  const auto* be = dynamic_cast<const detail::CpuBackend*>(&cpu_backend);
  return be != nullptr ? be->PoolStartError() : std::string();
}

const WeightLayout& CpuWeightLayout() {
  static const CpuLayout layout;
  return layout;
}

}  // namespace fak::cpu
