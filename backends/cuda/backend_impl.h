// The CUDA backend's class, shared by the files that implement it: cuda_backend.cpp (weights, KV and
// state stores, the step's uploads and downloads), backend_ops.cpp (the dense transformer's ops) and
// backend_hybrid.cpp (the Gated-DeltaNet ops). Internal to backends/cuda; users see cuda_backend.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends/cuda/activations.h"  // Activations
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernels.h"  // MatVec, RmsNorm, Attention, ...
#include "backends/cuda/step.h"     // StepQueue
#include "core/thread_pool.h"

namespace fak::cuda {

inline uint64_t U(const void* p) { return reinterpret_cast<uint64_t>(p); }
inline uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }

// FAK_CUDA_GRAPHS=0 runs every step op by op (for comparisons).
inline bool GraphsEnabled() {
  const char* v = std::getenv("FAK_CUDA_GRAPHS");
  return v == nullptr || v[0] != '0';
}

inline std::string ErrorText(cudaError_t e) {
  return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

inline Status CudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal("CUDA: {}: {}", what, ErrorText(e));
}

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

  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  int threads() const override { return 0; }
  // The GEMM tiles 64 activation rows; at 512 a 1.5B model's narrow matrices fill the GPU's 132 SMs.
  int64_t PrefillRows() const override { return 512; }
  const WeightLayout& layout() const override { return CudaWeightLayout(); }

  // Weights (cuda_backend.cpp; BindDeltaNet in backend_hybrid.cpp).
  Result<BoundWeight> BindMatrix(const Weight& w) override;
  Result<BoundWeight> BindVector(const Weight& w) override;
  Result<BoundWeight> BindEmbedding(const Weight& table, GgmlType as_type) override;
  Result<int32_t> BindRope(const RopeSpec& rope) override;
  Result<int32_t> BindDeltaNet(const DeltaNetSpec& d) override;

  // Activations, KV pages, state slots, the step (cuda_backend.cpp; CreateStates in backend_hybrid.cpp).
  Result<Tensor> Alloc(int64_t rows, int64_t cols) override { return acts_.Alloc(rows, cols, stream_); }
  void Free(Tensor t) override;
  Result<int32_t> CreateKv(const KvGeometry& g, int64_t max_pages) override;
  Status GrowKv(int32_t kv, int64_t n_pages) override;
  Result<int32_t> CreateStates(size_t slot_bytes, int64_t n_slots) override;
  void SetBatch(const BatchPlan& b) override;
  void Download(Tensor t, float* host) override;
  bool PinHost(void* host, size_t bytes) override;
  void UnpinHost(void* host) override;
  void CheckFinite(Tensor x, bool* finite) override;
  Status Synchronize() override;
  Result<double> MeasureBandwidth(double min_seconds) override;
  // The device counter of the products' tails (step.h FuseTail); once, when the backend is made.
  Status InitTails();
  // How many Quantize ops ShadowOf has queued: the products whose input's writer left no shadow they
  // read (the tests check which writers do).
  int64_t quantize_ops() const { return quantize_ops_; }

  // The dense transformer's ops (backend_ops.cpp).
  void Embed(BoundWeight table, Tensor out) override;
  void MatMul(BoundWeight w, Tensor x, Tensor y) override;
  void RmsNorm(Tensor x, BoundWeight w, Tensor y, float eps) override;
  void AddRow(Tensor x, BoundWeight b) override;
  void Add(Tensor x, Tensor y) override;
  void SiluMul(Tensor g, Tensor u) override;
  // Within a step a Rope waits: when the KvWrite of its keys follows, the q rope, the k rope and the
  // write become one launch (RopeKvWrite).
  void Rope(Tensor x, int64_t head_dim, int32_t rope) override;
  void KvWrite(int32_t kv, int64_t layer, Tensor k, Tensor v) override;
  void Attention(int32_t kv, int64_t layer, Tensor q, float scale, Tensor out) override;
  void GatherOutRows(Tensor x, Tensor out) override;
  void CopyKvPage(int32_t kv, int32_t src, int32_t dst) override;

  // The Gated-DeltaNet layers' ops and state slots (backend_hybrid.cpp).
  void SigmoidMul(Tensor x, Tensor g) override;
  void SplitHeads(Tensor x, int64_t head_dim, Tensor a, Tensor b) override;
  void GatedRmsNorm(Tensor x, BoundWeight w, Tensor z, float eps) override;
  void DeltaNetConv(int32_t states, int32_t dn, Tensor x, BoundWeight conv) override;
  void DeltaNetRule(int32_t states, int32_t dn, Tensor x, Tensor b, Tensor a, BoundWeight ssm_a,
                    BoundWeight dt_bias, Tensor out) override;
  void CopyState(int32_t states, int64_t src, int64_t dst) override;
  void ClearState(int32_t states, int64_t slot) override;

 private:
  struct PendingDownload {
    float* host;
    size_t offset, bytes;
  };
  struct PendingCheck {
    bool* finite;
    size_t offset;  // of its kFiniteFlags flags in the download area
  };
  static constexpr int64_t kMaxChecks = 64;  // CheckFinite calls per step

  static size_t Align(size_t n) { return (n + 255) / 256 * 256; }
  static constexpr int64_t kGraphRows = 64;  // steps of at most this many rows run as graphs
  static constexpr int64_t kSplitMaxRows = 4096;

  // The GEMM's piece scratch for this step. Steps that run as graphs (a graph keeps the address) share
  // one scratch sized for kGraphRows rows, allocated at the first such step and kept; larger steps
  // get another, grown to the batch. Without it (or if it cannot be had) the GEMM keeps a tile's
  // pieces in one block, which gives the same bits.
  void ReserveSplit();

  // A larger scratch for attention's chunk partials. Only a step's first Attention grows it (every
  // layer of a step needs the same), so no op queued before holds the old address.
  bool GrowAttnPart(int64_t floats);

  struct PendingRope {
    Tensor x;
    int64_t head_dim;
    int32_t rope;
  };
  void QueueRope(const PendingRope& p);
  void FlushRopes();

  void Queue(const char* what, std::vector<uint64_t> key, StepQueue::Launch launch);

  // Queues a copy of `bytes` from device memory into the pinned download area, at *at.
  bool QueueCopyDown(const void* src, size_t bytes, size_t* at);
  // A larger pinned download area; what was recorded into the old one finds the new at launch.
  bool GrowDownloads(size_t bytes);

  void Fail(Status s);
  void Check(cudaError_t e, const char* what);

  // Waits for the stream, then hands every pending download to its caller.
  bool DrainDownloads();

  // Makes room for `bytes` in a staging pair (with a device twin when `dev`); the stream must not be
  // reading the old area, so it is drained first.
  bool Reserve(Staging& s, size_t bytes, bool dev);

  template <typename T>
  const T* Stage(std::span<const T> a) {
    std::memcpy(up_.host + up_.used, a.data(), a.size() * sizeof(T));
    const T* dev = reinterpret_cast<const T*>(up_.dev + up_.used);
    up_.used += Align(a.size() * sizeof(T));
    return dev;
  }

  DeltaNetDevice DeviceDeltaNet(int32_t states, int32_t dn) const;

  bool ShadowSlot(const Tensor& t, Q8Act* s) { return acts_.ShadowSlot(t, s); }
  void Shadowed(const Tensor& t) { acts_.Shadowed(t, shadow_group_); }
  // The same with groups that restart every `row` values rather than every t.cols (Activations::Shadowed).
  void Shadowed(const Tensor& t, int64_t row) { acts_.Shadowed(t, shadow_group_, row); }
  void Written(const Tensor& t) { acts_.Written(t); }
  // The int8 shadow of x for a quantized MatMul of format f, quantized first (a queued op) when the op
  // that wrote x did not write it, or wrote it in groups f cannot read (GroupFor).
  bool ShadowOf(const Tensor& x, MatFormat f, Q8Act* s);
  // The group the ops that write activations quantize them in (Q8Act::group): 256 once a K-quant matrix
  // is bound (its products need them; a Q8_0 matrix of the same model reads them too), else 32. A
  // function of the bound weights, so a row's bits never depend on which op made its shadow.
  int shadow_group_ = 32;
  int64_t quantize_ops_ = 0;

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
  std::vector<int32_t> attn_groups_host_;  // kernels.h's AttnGroups of the batch
  int64_t n_attn_groups_ = 0, attn_group_rows_ = 0;
  std::vector<DeltaNetSpec> delta_nets_;
  std::vector<const float*> rope_tables_;
  std::vector<PendingRope> ropes_pending_;  // Rope calls waiting for the KvWrite that may join them
  Staging up_, down_;
  bool graphs_ = GraphsEnabled();
  StepQueue q_;  // after stream_, which it uses
  std::vector<PendingDownload> pending_;
  // Caller memory registered with the driver (PinHost): [begin, end) ranges that downloads go to directly.
  std::vector<std::pair<uintptr_t, uintptr_t>> pinned_;
  std::vector<PendingCheck> checks_;
  unsigned* tail_counter_ = nullptr;  // MatVecTail::counter of every product with a tail (InitTails)
  uint32_t* check_flags_ = nullptr;   // kMaxChecks * kFiniteFlags, one run per CheckFinite of a step
  // Threads that copy large downloads from the pinned area to their callers (a batched step's logits).
  std::unique_ptr<ThreadPool> copy_pool_;
};

}  // namespace fak::cuda
