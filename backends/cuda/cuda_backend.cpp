#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cuda/backend_impl.h"
#include "backends/cuda/weights.h"  // RepackForDevice
#include "core/timer.h"

namespace fak::cuda {
namespace {

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

}  // namespace

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_);
  q_.ForgetGraphs();
  for (const auto& r : pinned_) cudaHostUnregister(reinterpret_cast<void*>(r.first));  // callers' leftovers
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
  cudaFree(check_flags_);
  cudaFree(tail_counter_);
  cudaFree(up_.dev);
  cudaFreeHost(down_.host);
  cudaStreamDestroy(stream_);
}

Result<BoundWeight> CudaBackend::BindMatrix(const Weight& w) {
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
  if (GroupFor(m.format) == kKQuantGroup) shadow_group_ = kKQuantGroup;
  // Matrices narrow enough that the GEMM may compute their pieces in separate blocks (its scratch).
  if (ReadsQ8(m.format) && QuantPieces(m.cols) > 1 && m.rows <= kSplitMaxRows) {
    split_rows_ = std::max(split_rows_, m.rows);
  }
  return BoundWeight{static_cast<int32_t>(matrices_.size() - 1), w.rows, w.cols};
}

Result<BoundWeight> CudaBackend::BindVector(const Weight& w) {
  if (!w.present() || w.type != GgmlType::kF32 || w.packed) {
    return InvalidArgument("a vector weight must be f32 rows");
  }
  const size_t bytes = static_cast<size_t>(w.rows * w.cols) * 4;
  FAK_ASSIGN_OR_RETURN(void* p, DeviceAlloc(bytes, "a vector weight"));
  vectors_.push_back(static_cast<float*>(p));
  FAK_RETURN_IF_ERROR(CudaStatus(cudaMemcpy(p, w.data, bytes, cudaMemcpyHostToDevice), "vector upload"));
  return BoundWeight{static_cast<int32_t>(vectors_.size() - 1), w.rows, w.cols};
}

Result<BoundWeight> CudaBackend::BindEmbedding(const Weight& table, GgmlType as_type) {
  if (!table.present() || table.packed) return InvalidArgument("an embedding table must be GGUF rows");
  // Looked up on the host (the table stays in the model's host memory): a step embeds few rows.
  embeddings_.push_back({table, as_type});
  max_embed_cols_ = std::max(max_embed_cols_, table.cols);
  return BoundWeight{static_cast<int32_t>(embeddings_.size() - 1), table.rows, table.cols};
}

Result<int32_t> CudaBackend::BindRope(const RopeSpec& rope) {
  if (rope.inv_freq.empty()) return InvalidArgument("rope with no frequencies");
  ropes_.push_back(rope);
  return static_cast<int32_t>(ropes_.size() - 1);
}

void CudaBackend::Free(Tensor t) {
  cudaStreamSynchronize(stream_);        // no queued work may still use it
  if (acts_.Free(t)) q_.ForgetGraphs();  // a new buffer may take this address
}

Result<int32_t> CudaBackend::CreateKv(const KvGeometry& g, int64_t max_pages) {
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

Status CudaBackend::GrowKv(int32_t kv, int64_t n_pages) {
  KvStore& s = kv_[static_cast<size_t>(kv)];
  if (n_pages > s.max_pages) return OutOfRange("KV store holds {} pages, {} asked for", s.max_pages, n_pages);
  const auto have = static_cast<int64_t>(s.page_ptr.size());
  if (n_pages <= have) return Status::Ok();
  // Pages come in runs that double the store (at least 16 pages), so a growing cache allocates rarely.
  const int64_t add = std::min(s.max_pages - have, std::max({n_pages - have, have, int64_t{16}}));
  FAK_ASSIGN_OR_RETURN(void* run, DeviceAlloc(static_cast<size_t>(add) * s.page_bytes, "KV cache pages"));
  s.chunks.push_back(run);
  FAK_RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(run, 0, static_cast<size_t>(add) * s.page_bytes, stream_),
                                 "zeroing KV pages"));
  for (int64_t i = 0; i < add; ++i) {
    s.page_ptr.push_back(static_cast<uint8_t*>(run) + static_cast<size_t>(i) * s.page_bytes);
  }
  // From pageable memory: the copy is staged before the call returns, so the vector may change after.
  return CudaStatus(
      cudaMemcpyAsync(s.page_ptr_dev + have, s.page_ptr.data() + have,
                      static_cast<size_t>(add) * sizeof(void*), cudaMemcpyHostToDevice, stream_),
      "KV page table upload");
}

void CudaBackend::SetBatch(const BatchPlan& b) {
  ropes_pending_.clear();
  if (q_.in_step()) {  // a step that never reached Synchronize
    q_.Discard();
    pending_.clear();
    checks_.clear();
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
  for (const auto* a : {&b.positions, &b.row_seq, &b.page_begin, &b.out_rows, &b.pages}) {
    need += Align(a->size() * 4);
  }
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
  attn_groups_host_.clear();
  attn_group_rows_ = AttnGroups(b.positions.data(), b.row_seq.data(), n_rows_,
                                static_cast<int64_t>(b.page_begin.size()) - 1, &attn_groups_host_);
  n_attn_groups_ = static_cast<int64_t>(attn_groups_host_.size() / 3);
  need += Align(attn_groups_host_.size() * 4);
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
  // The groups' count depends on how the rows fall into sequences, not only on their number: it is
  // part of the step's shape.
  batch_.attn_groups = Stage(std::span<const int32_t>(attn_groups_host_));
  batch_.pages = Stage(b.pages);
  // A hybrid model's prompt steps run in plain stream order: on an H100, pp512 of the 2B hybrid geometry
  // went from 23.6-26.2K to 26.9-29.3K tok/s without programmatic dependent launch, where its decode
  // and the dense models' steps gain from it (docs/bench/gpu.md).
  const bool plain = !delta_nets_.empty() && n_rows_ > kGraphRows;
  q_.Begin({U(n_rows_), U(n_out_), U(static_cast<int64_t>(b.page_begin.size())), U(n_attn_groups_),
            U(attn_group_rows_), U(up_.dev), U(down_.host)},
           graphs_ && n_rows_ <= kGraphRows, plain);
}

bool CudaBackend::QueueCopyDown(const void* src, size_t bytes, size_t* at) {
  if (down_.used + bytes > down_.capacity) {
    // Within a step nothing has run yet, and SetBatch drained the stream: the pinned area can move
    // (the queued copies find it at launch). Outside a step, drain what is queued first.
    if (!q_.in_step() && !DrainDownloads()) return false;
    if (!GrowDownloads(down_.used + bytes)) return false;
  }
  const size_t off = down_.used;
  Queue("Download", {U(src), off, bytes, U(down_.host)}, [this, src, off, bytes](cudaStream_t s) {
    return cudaMemcpyAsync(down_.host + off, src, bytes, cudaMemcpyDeviceToHost, s);
  });
  down_.used += bytes;
  *at = off;
  return true;
}

void CudaBackend::Download(Tensor t, float* host) {
  if (!error_.ok()) return;
  FlushRopes();
  const size_t bytes = static_cast<size_t>(t.rows * t.cols) * 4;
  const auto at_host = reinterpret_cast<uintptr_t>(host);
  for (const auto& [begin, end] : pinned_) {
    if (at_host >= begin && at_host + bytes <= end) {  // registered memory: straight there
      const void* src = t.data;
      Queue("DownloadPinned", {U(src), U(host), bytes}, [host, src, bytes](cudaStream_t s) {
        return cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, s);
      });
      return;
    }
  }
  if (size_t at = 0; QueueCopyDown(t.data, bytes, &at)) pending_.push_back({host, at, bytes});
}

bool CudaBackend::PinHost(void* host, size_t bytes) {
  if (host == nullptr || bytes == 0) return false;
  if (cudaHostRegister(host, bytes, cudaHostRegisterDefault) != cudaSuccess) {
    (void)cudaGetLastError();  // refused (say, the range shares a page with registered memory): staged
    return false;
  }
  const auto b = reinterpret_cast<uintptr_t>(host);
  pinned_.emplace_back(b, b + bytes);
  return true;
}

void CudaBackend::UnpinHost(void* host) {
  const auto b = reinterpret_cast<uintptr_t>(host);
  const auto it = std::find_if(pinned_.begin(), pinned_.end(), [b](const auto& r) { return r.first == b; });
  if (it == pinned_.end()) return;
  // Downloads queued into it must land before the caller frees it.
  cudaStreamSynchronize(stream_);
  // Graphs that copy into it go: their copies hold on to this registration, and memory registered
  // again at the same address (a freed buffer's successor) is another one.
  q_.ForgetGraphsUsing(it->first, it->second);
  pinned_.erase(it);
  cudaHostUnregister(host);
}

void CudaBackend::CheckFinite(Tensor x, bool* finite) {
  if (!error_.ok()) return;
  FlushRopes();
  if (std::ssize(checks_) >= kMaxChecks) {
    return Fail(Internal("CUDA: more than {} finiteness checks in one step", kMaxChecks));
  }
  if (check_flags_ == nullptr) {
    auto p = DeviceAlloc(static_cast<size_t>(kMaxChecks * kFiniteFlags) * 4, "finiteness flags");
    if (!p.ok()) return Fail(p.status());
    check_flags_ = static_cast<uint32_t*>(*p);
  }
  uint32_t* flags = check_flags_ + checks_.size() * kFiniteFlags;
  const float* src = x.data;
  const int64_t n = x.rows * x.cols;
  Queue("CheckFinite", {U(src), U(n), U(flags)},
        [src, n, flags](cudaStream_t s) { return NonFiniteFlags(src, n, flags, s); });
  if (size_t at = 0; QueueCopyDown(flags, kFiniteFlags * 4, &at)) checks_.push_back({finite, at});
}

// Copies of 1 GiB from one device buffer into another on the backend's stream, timed by events, until
// min_seconds have passed; the best copy, 2 bytes moved per byte copied.
Result<double> CudaBackend::MeasureBandwidth(double min_seconds) {
  FAK_RETURN_IF_ERROR(Synchronize());
  constexpr size_t kBytes = size_t{1} << 30;
  FAK_ASSIGN_OR_RETURN(void* src, DeviceAlloc(kBytes, "the bandwidth measurement"));
  auto dst = DeviceAlloc(kBytes, "the bandwidth measurement");
  cudaEvent_t start = nullptr, stop = nullptr;
  auto done = [&](Status s) -> Status {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    cudaFree(src);
    if (dst.ok()) cudaFree(*dst);
    return s;
  };
  if (!dst.ok()) return done(dst.status());
  Status s = CudaStatus(cudaEventCreate(&start), "creating an event");
  if (s.ok()) s = CudaStatus(cudaEventCreate(&stop), "creating an event");
  if (s.ok()) s = CudaStatus(cudaMemsetAsync(src, 1, kBytes, stream_), "filling the copy source");
  float best_ms = 1e30f;
  const Timer total;
  for (int i = 0; s.ok() && (i < 2 || total.Seconds() < min_seconds); ++i) {  // the first warms up
    s = CudaStatus(cudaEventRecord(start, stream_), "recording an event");
    if (s.ok())
      s = CudaStatus(cudaMemcpyAsync(*dst, src, kBytes, cudaMemcpyDeviceToDevice, stream_), "copying");
    if (s.ok()) s = CudaStatus(cudaEventRecord(stop, stream_), "recording an event");
    if (s.ok()) s = CudaStatus(cudaEventSynchronize(stop), "waiting for the copy");
    float ms = 0;
    if (s.ok()) s = CudaStatus(cudaEventElapsedTime(&ms, start, stop), "timing the copy");
    if (s.ok() && i > 0) best_ms = std::min(best_ms, ms);
  }
  FAK_RETURN_IF_ERROR(done(s));
  return 2.0 * static_cast<double>(kBytes) / (static_cast<double>(best_ms) * 1e-3) * 1e-9;
}

Status CudaBackend::Synchronize() {
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
      checks_.clear();
      down_.used = 0;
    }
  }
  DrainDownloads();
  q_.ReportProfile();
  Status s = std::move(error_);
  error_ = Status::Ok();
  return s;
}

void CudaBackend::ReserveSplit() {
  q_.SetSplit(nullptr, 0);
  if (split_rows_ == 0) return;
  if (n_rows_ <= kGraphRows) {
    if (graph_split_ == nullptr) {
      auto p = DeviceAlloc(static_cast<size_t>(4 * kGraphRows * split_rows_) * 4, "the GEMM's piece scratch");
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

void CudaBackend::Queue(const char* what, std::vector<uint64_t> key, StepQueue::Launch launch) {
  Check(q_.Add(what, std::move(key), std::move(launch)), what);
}

bool CudaBackend::GrowDownloads(size_t bytes) {
  const size_t cap = std::max(bytes, down_.capacity * 2);
  uint8_t* p = nullptr;
  if (cudaError_t e = cudaMallocHost(&p, cap); e != cudaSuccess) {
    Fail(Busy("CUDA: cannot pin {:.1f} MiB of host memory for downloads: {}", cap / 1048576.0, ErrorText(e)));
    return false;
  }
  if (down_.used > 0) std::memcpy(p, down_.host, down_.used);
  cudaFreeHost(down_.host);
  down_.host = p;
  down_.capacity = cap;
  q_.ForgetGraphs();
  return true;
}

void CudaBackend::Fail(Status s) {
  if (error_.ok()) error_ = std::move(s);
}

void CudaBackend::Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Fail(CudaStatus(e, what));
}

bool CudaBackend::DrainDownloads() {
  const cudaError_t e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) {
    Check(e, "synchronize");
    pending_.clear();
    checks_.clear();
    down_.used = 0;
    return false;
  }
  for (const PendingCheck& c : checks_) {
    uint32_t flags[kFiniteFlags];
    std::memcpy(flags, down_.host + c.offset, sizeof(flags));
    *c.finite = std::all_of(flags, flags + kFiniteFlags, [](uint32_t f) { return f == 0; });
  }
  checks_.clear();
  // A batched step's logits are tens of MB (32 rows of a 152k vocabulary: 19 MB): copied by several
  // threads, in 1 MiB pieces claimed as they go.
  size_t total = 0;
  for (const auto& p : pending_) total += p.bytes;
  constexpr size_t kPiece = size_t{1} << 20;
  if (total >= 4 * kPiece && copy_pool_ == nullptr) {
    copy_pool_ = std::make_unique<ThreadPool>(std::clamp(DefaultThreadCount(), 1, 8), /*pin=*/false);
  }
  if (total < 4 * kPiece || copy_pool_->size() == 1) {
    for (const auto& p : pending_) std::memcpy(p.host, down_.host + p.offset, p.bytes);
  } else {
    std::vector<std::pair<size_t, size_t>> pieces;  // (pending index, offset within it)
    for (size_t i = 0; i < pending_.size(); ++i) {
      for (size_t o = 0; o < pending_[i].bytes; o += kPiece) pieces.emplace_back(i, o);
    }
    copy_pool_->ParallelForDynamic(std::ssize(pieces), 1, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const auto [i, o] = pieces[static_cast<size_t>(k)];
        const PendingDownload& p = pending_[i];
        std::memcpy(reinterpret_cast<uint8_t*>(p.host) + o, down_.host + p.offset + o,
                    std::min(kPiece, p.bytes - o));
      }
    });
  }
  pending_.clear();
  down_.used = 0;
  return true;
}

bool CudaBackend::Reserve(Staging& s, size_t bytes, bool dev) {
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
  auto backend = std::make_unique<CudaBackend>(stream);
  FAK_RETURN_IF_ERROR(backend->InitTails());
  return std::unique_ptr<Backend>(std::move(backend));
}

Status CudaBackend::InitTails() {
  constexpr int64_t kCounters = 4096;  // SiLU groups of an FFN up to 131,072 wide; q and k heads
  constexpr size_t kBytes = kCounters * sizeof(unsigned);
  FAK_ASSIGN_OR_RETURN(void* p, DeviceAlloc(kBytes, "the tail counters"));
  tail_counter_ = static_cast<unsigned*>(p);
  FAK_RETURN_IF_ERROR(
      CudaStatus(cudaMemsetAsync(tail_counter_, 0, kBytes, stream_), "zeroing the tail counters"));
  FAK_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "zeroing the tail counters"));
  q_.SetTailCounters(tail_counter_, kCounters);
  return Status::Ok();
}

const WeightLayout& CudaWeightLayout() {
  static const GgufRows layout;
  return layout;
}

}  // namespace fak::cuda
