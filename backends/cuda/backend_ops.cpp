// The CUDA backend's ops of the dense transformer: each queues its kernel on the step (step.h), joined
// to the op before where the two fuse (bias and residual epilogues, rope with the KV write).
#include <cstring>

#include "backends/cpu/ops.h"  // EmbeddingRow: the reference lookup, run on the host
#include "backends/cuda/backend_impl.h"

namespace fak::cuda {

void CudaBackend::Embed(BoundWeight table, Tensor out) {
  if (!error_.ok()) return;
  FlushRopes();
  const Embedding& e = embeddings_[static_cast<size_t>(table.id)];
  if (out.cols > max_embed_cols_ || out.rows != n_rows_) {
    return Fail(Internal("CUDA: Embed into a tensor of the wrong shape"));
  }
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

void CudaBackend::MatMul(BoundWeight w, Tensor x, Tensor y) {
  if (!error_.ok()) return;
  FlushRopes();
  const DeviceMatrix& m = matrices_[static_cast<size_t>(w.id)];
  Q8Act xq;
  if (ReadsQ8(m.format) && !ShadowOf(x, m.format, &xq)) return;
  Check(q_.AddMatVec(m, MatVecOut{.y = y.data, .ldy = y.cols}, x.data, xq, x.rows), "MatMul");
  Written(y);
}

void CudaBackend::RmsNorm(Tensor x, BoundWeight w, Tensor y, float eps) {
  if (!error_.ok()) return;
  FlushRopes();
  Q8Act sh;
  const bool shadow = y.cols % 32 == 0 && ShadowSlot(y, &sh);
  int8_t* q = shadow ? const_cast<int8_t*>(sh.q) : nullptr;
  float* d = shadow ? const_cast<float*>(sh.d) : nullptr;
  const int group = shadow_group_;
  const float* wv = vectors_[static_cast<size_t>(w.id)];
  const int64_t rows = x.rows, cols = x.cols;
  if (cols > 32 * kNormMaxRuns && TailInKernel(TailKind::kRmsNorm)) {
    return Fail(Unsupported("CUDA: RMS norm over rows of {} elements (at most {})", cols, 32 * kNormMaxRuns));
  }
  const float* xs = x.data;
  float* ys = y.data;
  MatVecTail t;
  t.kind = TailKind::kRmsNorm;
  t.x = xs;
  t.w = wv;
  t.y = ys;
  t.cols = cols;
  t.eps = eps;
  // A tail inside the product quantizes per 32 values: with groups of 256 it runs as the norm's own
  // launch after the product (matvec.cu TailRunsInKernel), which writes them.
  t.q = q;
  t.d = d;
  t.group = group;
  if (q_.FuseTail(t, rows)) return shadow ? Shadowed(y) : Written(y);
  uint32_t eps_bits;
  std::memcpy(&eps_bits, &eps, 4);
  Queue("RmsNorm",
        {U(xs), U(wv), U(ys), U(rows), U(cols), eps_bits, U(q), U(d), U(group),
         static_cast<uint64_t>(TailInKernel(TailKind::kRmsNorm))},  // which order the kernel sums in
        [=](cudaStream_t s) { return fak::cuda::RmsNorm(xs, wv, ys, rows, cols, eps, q, d, group, s); });
  shadow ? Shadowed(y) : Written(y);
}

void CudaBackend::AddRow(Tensor x, BoundWeight b) {
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

void CudaBackend::Add(Tensor x, Tensor y) {
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

void CudaBackend::SiluMul(Tensor g, Tensor u) {
  if (!error_.ok()) return;
  FlushRopes();
  Q8Act sh;
  const bool shadow = ShadowSlot(g, &sh);
  int8_t* q = shadow ? const_cast<int8_t*>(sh.q) : nullptr;
  float* d = shadow ? const_cast<float*>(sh.d) : nullptr;
  if (shadow && g.cols % 32 != 0) q = nullptr, d = nullptr;
  const int group = shadow_group_;
  float* gs = g.data;
  const float* us = u.data;
  const int64_t rows = g.rows, cols = g.cols;
  MatVecTail t;
  t.kind = TailKind::kSiluMul;
  t.y = gs;
  t.u = us;
  t.cols = g.cols;
  t.q = q;  // in groups of 256 the tail runs as SiluMul's own launch (see RmsNorm)
  t.d = d;
  t.group = group;
  if (q_.FuseTail(t, g.rows)) return q != nullptr ? Shadowed(g) : Written(g);
  Queue("SiluMul", {U(gs), U(us), U(rows), U(cols), U(q), U(d), U(group)},
        [=](cudaStream_t s) { return fak::cuda::SiluMul(gs, us, rows, cols, q, d, group, s); });
  q != nullptr ? Shadowed(g) : Written(g);
}

void CudaBackend::Rope(Tensor x, int64_t head_dim, int32_t rope) {
  if (!error_.ok()) return;
  if (q_.in_step() && ropes_pending_.size() < 2) {
    ropes_pending_.push_back({x, head_dim, rope});
  } else {
    FlushRopes();
    QueueRope({x, head_dim, rope});
  }
  Written(x);
}

void CudaBackend::KvWrite(int32_t kv, int64_t layer, Tensor k, Tensor v) {
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
    MatVecTail t;
    t.kind = TailKind::kRopeKvWrite;
    t.rq = qs;
    t.q_cols = q_cols;
    t.k = ks;
    t.v = vs;
    t.head_dim = hd;
    t.half = half;
    t.layer = layer;
    t.cos_sin = table;
    t.neox = neox;
    t.kv = view;
    t.b = b;
    if (q_.FuseTail(t, rows)) return;
    Queue("RopeKvWrite",
          {U(qs), U(q_cols), U(ks), U(vs), U(rows), U(hd), U(half), U(table), neox, U(view.page_ptr),
           U(layer), U(b.positions), U(b.pages)},
          [=](cudaStream_t s) {
            return fak::cuda::RopeKvWrite(qs, q_cols, ks, vs, rows, hd, half, table, neox, view, b, layer, s);
          });
    return;
  }
  FlushRopes();
  Queue("KvWrite", {U(view.page_ptr), U(layer), U(ks), U(vs), U(rows), U(b.positions), U(b.pages)},
        [=](cudaStream_t s) { return fak::cuda::KvWrite(view, b, layer, ks, vs, rows, s); });
}

void CudaBackend::Attention(int32_t kv, int64_t layer, Tensor q, float scale, Tensor out) {
  if (!error_.ok()) return;
  FlushRopes();
  const KvStore& st = kv_[static_cast<size_t>(kv)];
  Q8Act sh;
  const DeviceKv view = st.View();
  // Groups of 256 values where a group is whole heads of one block (kernels.h AttnShadowGroups); where
  // not, the product that reads out quantizes it.
  const int og = shadow_group_;
  const bool shadow =
      st.g.head_dim % 32 == 0 &&
      (og == 32 || AttnShadowGroups(view.f32, st.g.head_dim, q.cols / st.g.head_dim / view.n_kv_head)) &&
      ShadowSlot(out, &sh);
  int8_t* oq = shadow ? const_cast<int8_t*>(sh.q) : nullptr;
  float* od = shadow ? const_cast<float*>(sh.d) : nullptr;
  const DeviceBatch b = batch_;
  const float* qs = q.data;
  float* os = out.data;
  const int64_t rows = q.rows, n_head = q.cols / st.g.head_dim, max_ctx = max_ctx_;
  // Scratch for the chunk partials of long contexts.
  const int64_t part_floats = AttnPartFloats(rows, n_head, st.g.head_dim, max_ctx);
  if (part_floats > attn_part_floats_ && !GrowAttnPart(part_floats)) return;
  float* part = part_floats > 0 ? attn_part_ : nullptr;
  if (rows != n_rows_) return Fail(Internal("CUDA: Attention over a tensor of the wrong shape"));
  const int64_t n_groups = n_attn_groups_, group_rows = attn_group_rows_;
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, 4);
  Queue("Attention",
        {U(view.page_ptr), U(layer), U(qs), U(rows), U(n_head), scale_bits, U(os), U(oq), U(od), U(og),
         U(b.positions), U(b.pages), U(b.attn_groups), U(n_groups), U(group_rows), U(part),
         U(part_floats > 0 ? AttnGridChunks(max_ctx) : 1)},
        [=](cudaStream_t s) {
          return fak::cuda::Attention(view, b, layer, qs, rows, n_head, scale, os, oq, od, og, max_ctx, part,
                                      n_groups, group_rows, s);
        });
  shadow ? Shadowed(out) : Written(out);
}

void CudaBackend::GatherOutRows(Tensor x, Tensor out) {
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

void CudaBackend::CopyKvPage(int32_t kv, int32_t src, int32_t dst) {
  if (!error_.ok()) return;
  FlushRopes();
  const KvStore& st = kv_[static_cast<size_t>(kv)];
  void* d = st.page_ptr[static_cast<size_t>(dst)];
  const void* sp = st.page_ptr[static_cast<size_t>(src)];
  const size_t bytes = st.page_bytes;
  Queue("CopyKvPage", {U(d), U(sp), bytes},
        [=](cudaStream_t s) { return cudaMemcpyAsync(d, sp, bytes, cudaMemcpyDeviceToDevice, s); });
}

bool CudaBackend::GrowAttnPart(int64_t floats) {
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

void CudaBackend::QueueRope(const PendingRope& p) {
  const RopeSpec& r = ropes_[static_cast<size_t>(p.rope)];
  const int64_t half = static_cast<int64_t>(r.inv_freq.size()), rows = p.x.rows, cols = p.x.cols,
                head_dim = p.head_dim;
  const float* table = rope_tables_[static_cast<size_t>(p.rope)];
  const bool neox = r.neox;
  float* xs = p.x.data;
  Queue("Rope", {U(xs), U(rows), U(cols), U(head_dim), U(half), U(table), neox},
        [=](cudaStream_t s) { return fak::cuda::Rope(xs, rows, cols, head_dim, half, table, neox, s); });
}

void CudaBackend::FlushRopes() {
  for (const PendingRope& p : ropes_pending_) QueueRope(p);
  ropes_pending_.clear();
}

bool CudaBackend::ShadowOf(const Tensor& x, MatFormat f, Q8Act* s) {
  if (!acts_.ShadowSlot(x, s) || x.cols % 32 != 0) {
    Fail(Internal("CUDA: a quantized MatMul needs an activation tensor of whole 32-element runs"));
    return false;
  }
  const int need = GroupFor(f);
  int have = 0;
  if (acts_.ShadowValid(x, &have) && (need == 32 || have == need)) {
    s->group = have;
    return true;
  }
  const int group = need == 32 ? shadow_group_ : need;
  const float* xs = x.data;
  const int64_t rows = x.rows, cols = x.cols;
  int8_t* q = const_cast<int8_t*>(s->q);
  float* d = const_cast<float*>(s->d);
  Queue("Quantize", {U(xs), U(rows), U(cols), U(q), U(d), U(group)},
        [=](cudaStream_t st) { return fak::cuda::Quantize(xs, rows, cols, q, d, group, st); });
  acts_.Shadowed(x, group);
  ++quantize_ops_;
  s->group = group;
  return error_.ok();
}

}  // namespace fak::cuda
