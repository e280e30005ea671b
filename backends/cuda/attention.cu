// Paged causal attention in f32 arithmetic, for the geometries the tensor-core kernel (attention_mma.cu)
// does not take: f32 caches, head sizes other than 64 and 128, groups of more than 8 query heads.
// One block of 128 threads per (row, query head): the row's positions are
// visited in tiles of 128 (one key per thread), with an online softmax whose maxima and sums are
// reduced in a fixed tree order, and each thread accumulates its value dims over the tile's positions
// in order. Contexts longer than 256 positions (head sizes 64, 128, 256) are split into at most 16
// chunks (kernels.h's AttnChunkLen, a function of the row's context alone), each walked that way by
// its own block, and the chunks' partials are combined in chunk order by CombineChunks: a long decode
// row keeps 16 blocks per head busy instead of one. A row's result therefore depends only on its query
// and its sequence's cache: not on the batch, nor on how its prompt was chunked.
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/async_copy.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/kv_pages.cuh"
#include "backends/cuda/pdl.cuh"

namespace fak::cuda {
namespace {

constexpr int kTile = 128;  // threads per block and positions per tile
constexpr int kMaxHeadDim = 256;

__device__ __forceinline__ float BlockReduce(float v, float* scratch, bool max) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x % kTile) >> 5;  // warp of its group of kTile
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, m);
    v = max ? fmaxf(v, o) : v + o;
  }
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int k = 1; k < kTile / 32; ++k) r = max ? fmaxf(r, scratch[k]) : r + scratch[k];
  __syncthreads();
  return r;
}

// out[e] = v and, with a shadow, its int8 value and block scale: called by every lane of a warp for 32
// consecutive elements.
__device__ __forceinline__ void StoreOutput(float v, int64_t e, float* out, int8_t* oq, float* od) {
  out[e] = v;
  if (oq == nullptr) return;
  float amax = fabsf(v);
#pragma unroll
  for (int mm = 16; mm > 0; mm >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, mm));
  const float dv = ShadowScale(amax);
  oq[e] = ShadowValue(v, dv);
  if ((threadIdx.x & 31) == 0) od[e / 32] = dv;
}

// out[e0 + i] = v[k] for i = tid + k kTile: a group of kTile kPer values held by the kTile threads of
// this thread's group of the block, with the shadow in one group of that many values (one scale, from
// the largest magnitude: exact in any order, so the quantize kernel's bits). Every group of the block
// calls it (BlockReduce's barriers).
template <int kPer>
__device__ __forceinline__ void StoreGroup(const float (&v)[kPer], int64_t e0, int tid, float* scratch,
                                           float* out, int8_t* oq, float* od) {
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    out[e0 + tid + k * kTile] = v[k];
    amax = fmaxf(amax, fabsf(v[k]));
  }
  const float dv = ShadowScale(BlockReduce(amax, scratch, true));
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t e = e0 + tid + k * kTile;
    oq[e] = ShadowValue(v[k], dv);
    if (e % 32 == 0) od[e / 32] = dv;
  }
}

template <typename T>
__device__ __forceinline__ float ToFloat(T v) {
  if constexpr (sizeof(T) == 2) {
    return __half2float(v);
  } else {
    return v;
  }
}

// v[j] = p[j] as floats for the kDims elements at p, in the widest loads their size allows (p is aligned
// to the whole run: a lane's dims of a 16-byte aligned row).
template <typename T, int kDims>
__device__ __forceinline__ void LoadDims(const T* p, float (&v)[kDims]) {
  constexpr int kBytes = kDims * static_cast<int>(sizeof(T));
  constexpr int kWord = kBytes < 16 ? kBytes : 16;
  using Word = std::conditional_t<kWord == 4, uint32_t, std::conditional_t<kWord == 8, uint2, uint4>>;
  constexpr int kPer = kWord / static_cast<int>(sizeof(T));
#pragma unroll
  for (int c = 0; c < kBytes / kWord; ++c) {
    const Word w = *reinterpret_cast<const Word*>(p + c * kPer);
    const T* e = reinterpret_cast<const T*>(&w);
#pragma unroll
    for (int u = 0; u < kPer; ++u) v[c * kPer + u] = ToFloat(e[u]);
  }
}

template <typename T>
__global__ void __launch_bounds__(kTile)
    AttentionKernel(DeviceKv kv, DeviceBatch b, int64_t layer, const float* q, int64_t n_head, float scale,
                    float* out, int8_t* oq, float* od) {
  AfterPrevious();
  __shared__ float qs[kMaxHeadDim];
  __shared__ float p[kTile];
  __shared__ float scratch[kTile / 32];
  const int64_t row = blockIdx.x, head = blockIdx.y;
  const int64_t hd = kv.head_dim, group = n_head / kv.n_kv_head, g = head / group;
  const int tid = threadIdx.x;
  const int64_t width = n_head * hd;
  for (int64_t i = tid; i < hd; i += kTile) qs[i] = q[row * width + head * hd + i];
  __syncthreads();
  const int64_t ctx = static_cast<int64_t>(b.positions[row]) + 1;
  const int32_t* table = b.pages + b.page_begin[b.row_seq[row]];
  const int64_t block = kv.page_tokens * hd;
  const int64_t k_off = ((layer * 2 + 0) * kv.n_kv_head + g) * block;
  const int64_t v_off = ((layer * 2 + 1) * kv.n_kv_head + g) * block;

  float m = -FLT_MAX, l = 0.0f;
  float acc[kMaxHeadDim / kTile] = {0.0f, 0.0f};
  for (int64_t t0 = 0; t0 < ctx; t0 += kTile) {
    const int64_t t = t0 + tid;
    float s = -FLT_MAX;
    if (t < ctx) {
      const T* key = PositionRow<T>(kv, table, t, hd) + k_off;
      float dot = 0.0f;
      for (int64_t i = 0; i < hd; ++i) dot = __fmaf_rn(qs[i], ToFloat(key[i]), dot);
      s = dot * scale;
    }
    const float m_new = fmaxf(m, BlockReduce(s, scratch, true));
    const float alpha = expf(m - m_new);
    const float pt = t < ctx ? expf(s - m_new) : 0.0f;
    p[tid] = pt;
    l = l * alpha + BlockReduce(pt, scratch, false);  // the reduction's barrier also publishes p
    const int64_t n = ctx - t0 < kTile ? ctx - t0 : kTile;
#pragma unroll
    for (int k = 0; k < kMaxHeadDim / kTile; ++k) {
      const int64_t dim = tid + k * kTile;
      if (dim >= hd) break;
      float a = acc[k] * alpha;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t pos = t0 + j;
        const T* val = PositionRow<T>(kv, table, pos, hd) + v_off;
        a = __fmaf_rn(p[j], ToFloat(val[dim]), a);
      }
      acc[k] = a;
    }
    m = m_new;
    __syncthreads();  // p is rewritten by the next tile
  }
  float* o = out + row * width + head * hd;
#pragma unroll
  for (int k = 0; k < kMaxHeadDim / kTile; ++k) {
    const int64_t dim = tid + k * kTile;
    if (dim < hd) o[dim] = acc[k] / l;
  }
  if (oq == nullptr) return;
  // The int8 shadow of this head's output: hd is a multiple of 32, so warps cover whole blocks.
  __syncthreads();
  for (int64_t i = tid; i < hd; i += kTile) {
    const float v = o[i];
    float amax = fabsf(v);
#pragma unroll
    for (int mm = 16; mm > 0; mm >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, mm));
    const float dv = ShadowScale(amax);
    const int64_t e = row * width + head * hd + i;
    oq[e] = ShadowValue(v, dv);
    if ((tid & 31) == 0) od[e / 32] = dv;
  }
}

// Head dims a multiple of 32 (up to 256): the scores as above, with each key read in 16-byte loads;
// the weighted sum of values by warps, warp w taking the tile's positions w, w + 4, ... and each lane
// kDims of the head's dims, so a warp reads whole value rows at once; the four warps' sums are added
// in warp order at the end. Fixed by the head size and the context alone.
//
// A block is kHeads groups of 128 threads, group h computing query head blockIdx.y * kHeads + h of
// its row with exactly the arithmetic above. With kStaged (prefill: the kHeads query heads of one KV
// head) each tile's keys and values are first copied to shared memory, once for the kHeads heads, in
// coalesced 16-byte copies (the next tile's while this one is computed, for head sizes up to 128):
// the heads read them there instead of each from global memory. Where a value is read from changes no
// bit, so a row's result is the same whichever variant ran.
template <typename T, int kDims, int kHeads, bool kStaged>
__global__ void __launch_bounds__(kTile* kHeads)
    AttentionWarpKernel(DeviceKv kv, DeviceBatch b, int64_t layer, const float* q, int64_t n_head,
                        float scale, float* out, int8_t* oq, float* od, int og, float* part_out) {
  static_assert(kStaged || kHeads == 1, "unstaged blocks compute one head (vrow is the block's)");
  constexpr int kHd = kDims * 32;
  constexpr int kPerLoad = 16 / sizeof(T);
  constexpr int kKeyStride = kHd + 16 / sizeof(T);  // staged keys: rows padded by 16 bytes
  __shared__ float qs_all[kHeads][kHd];
  __shared__ float p_all[kHeads][kTile];
  __shared__ float scratch_all[kHeads][kTile / 32];
  __shared__ float sums_all[kHeads][kTile / 32][kHd];
  __shared__ const T* vrow[kStaged ? 1 : kTile];  // unstaged: the value row of each of the tile's positions
  extern __shared__ __align__(16) uint8_t staged[];
  const int sub = threadIdx.x / kTile;
  float* qs = qs_all[sub];
  float* p = p_all[sub];
  float* scratch = scratch_all[sub];
  const int64_t row = blockIdx.x, head = static_cast<int64_t>(blockIdx.y) * kHeads + sub;
  const int64_t group = n_head / kv.n_kv_head, g = head / group;
  const int tid = threadIdx.x % kTile, lane = tid & 31, warp = tid >> 5;
  const int64_t width = n_head * kHd;
  // Before the wait: the row's context and page list (the batch arrays and page table are uploaded
  // before the step's kernels and written by none), and the page of this thread's first key, so the
  // address chain is resolved while the previous kernel runs.
  // This block's chunk of the row's positions: [begin, end).
  const int64_t ctx = static_cast<int64_t>(b.positions[row]) + 1;
  const int64_t chunk_len = AttnChunkLen(ctx), n_chunks = (ctx + chunk_len - 1) / chunk_len;
  if (static_cast<int64_t>(blockIdx.z) >= n_chunks) return;
  const int64_t begin = static_cast<int64_t>(blockIdx.z) * chunk_len;
  const int64_t end = ctx - begin < chunk_len ? ctx : begin + chunk_len;
  const int32_t* table = b.pages + b.page_begin[b.row_seq[row]];
  if (begin + tid < end) {
    PrefetchL1(kv.page_ptr +
               table[static_cast<uint32_t>(begin + tid) / static_cast<uint32_t>(kv.page_tokens)]);
  }
  AfterPrevious();
  for (int i = tid; i < kHd; i += kTile) qs[i] = q[row * width + head * kHd + i];
  __syncthreads();
  const int64_t block = kv.page_tokens * kHd;
  const int64_t k_off = ((layer * 2 + 0) * kv.n_kv_head + g) * block;
  const int64_t v_off = ((layer * 2 + 1) * kv.n_kv_head + g) * block;
  constexpr int kBuffers = kDims <= 4 ? 2 : 1;
  constexpr int kBufferElems = kTile * (kKeyStride + kHd);
  constexpr int kChunks = kHd / kPerLoad;  // 16-byte chunks per key or value row
  // Copies keys and values of positions [t, t + kTile) (up to end) into buffer `buf`.
  auto issue = [&](int64_t t, int buf) {
    T* kb = reinterpret_cast<T*>(staged) + buf * kBufferElems;
    T* vb = kb + kTile * kKeyStride;
    const int64_t rows = end - t < kTile ? end - t : kTile;
    for (int c = threadIdx.x; c < rows * kChunks; c += kTile * kHeads) {
      const int64_t j = c / kChunks, pos = t + j;
      const int part = static_cast<int>(c % kChunks);
      const T* base = PositionRow<T>(kv, table, pos, kHd) + part * kPerLoad;
      CopyAsync16(kb + j * kKeyStride + part * kPerLoad, base + k_off);
      CopyAsync16(vb + j * kHd + part * kPerLoad, base + v_off);
    }
    CopyCommit();
  };
  if constexpr (kStaged && kBuffers == 2) issue(begin, 0);

  float m = -FLT_MAX, l = 0.0f;
  float acc[kDims];
#pragma unroll
  for (int j = 0; j < kDims; ++j) acc[j] = 0.0f;
  for (int64_t t0 = begin; t0 < end; t0 += kTile) {
    const int64_t n = end - t0 < kTile ? end - t0 : kTile;
    const int buf = kBuffers == 2 ? static_cast<int>(((t0 - begin) / kTile) & 1) : 0;
    const T* ks = reinterpret_cast<const T*>(staged) + buf * kBufferElems;
    const T* vs = ks + kTile * kKeyStride;
    if constexpr (kStaged) {
      if constexpr (kBuffers == 2) {
        if (t0 + kTile < end) {
          issue(t0 + kTile, buf ^ 1);  // its buffer was last read in the tile before this one
        } else {
          CopyCommit();
        }
        CopyWait<1>();
      } else {
        issue(t0, 0);  // the previous tile's reads ended at its closing barrier
        CopyWait<0>();
      }
      __syncthreads();
    }
    const int64_t t = t0 + tid;
    float s = -FLT_MAX;
    if (t < end) {
      const T* key = ks + tid * kKeyStride;
      if constexpr (!kStaged) {
        const T* at = PositionRow<T>(kv, table, t, kHd);
        key = at + k_off;
        vrow[tid] = at + v_off;  // published by the reductions' barriers below
      }
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kHd; i += kPerLoad) {
        const int4 raw = *reinterpret_cast<const int4*>(key + i);
        const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int u = 0; u < kPerLoad; ++u) dot = __fmaf_rn(qs[i + u], ToFloat(e[u]), dot);
      }
      s = __fmul_rn(dot, scale);
    }
    const float m_new = fmaxf(m, BlockReduce(s, scratch, true));
    const float alpha = expf(m - m_new);
    const float pt = t < end ? expf(s - m_new) : 0.0f;
    p[tid] = pt;
    l = __fmaf_rn(l, alpha, BlockReduce(pt, scratch, false));  // the reduction's barrier also publishes p
#pragma unroll
    for (int j = 0; j < kDims; ++j) acc[j] = __fmul_rn(acc[j], alpha);
      // Unrolled so that a decode row's value loads (from the cache, not staged) are in flight together;
      // the sum stays in position order.
#pragma unroll(kStaged ? 4 : 16)
    for (int64_t jt = warp; jt < n; jt += kTile / 32) {
      const T* val = (kStaged ? vs + jt * kHd : vrow[jt]) + lane * kDims;
      const float pj = p[jt];
      float vj[kDims];
      LoadDims<T, kDims>(val, vj);
#pragma unroll
      for (int j = 0; j < kDims; ++j) acc[j] = __fmaf_rn(pj, vj[j], acc[j]);
    }
    m = m_new;
    __syncthreads();  // p is rewritten by the next tile
  }
  float(*sums)[kHd] = sums_all[sub];
#pragma unroll
  for (int j = 0; j < kDims; ++j) sums[warp][lane * kDims + j] = acc[j];
  __syncthreads();
  if (n_chunks > 1) {  // this chunk's partials: the value sums, its maximum and normalizer
    float* pr = part_out + ((row * n_head + head) * kAttnMaxChunks + blockIdx.z) * (kHd + 2);
    for (int i = tid; i < kHd; i += kTile) {
      float v = sums[0][i];
#pragma unroll
      for (int w = 1; w < kTile / 32; ++w) v = __fadd_rn(v, sums[w][i]);
      pr[i] = v;
    }
    if (tid == 0) pr[kHd] = m, pr[kHd + 1] = l;
    return;
  }
  if constexpr (kHd == kKQuantGroup) {
    if (oq != nullptr && og != 32) {  // the head is one group of the shadow (AttnShadowGroups)
      float v[kHd / kTile];
#pragma unroll
      for (int k = 0; k < kHd / kTile; ++k) {
        const int i = tid + k * kTile;
        float a = sums[0][i];
#pragma unroll
        for (int w = 1; w < kTile / 32; ++w) a = __fadd_rn(a, sums[w][i]);
        v[k] = __fdiv_rn(a, l);
      }
      StoreGroup(v, row * width + head * kHd, tid, scratch, out, oq, od);
      return;
    }
  }
  for (int i = tid; i < kHd; i += kTile) {
    float v = sums[0][i];
#pragma unroll
    for (int w = 1; w < kTile / 32; ++w) v = __fadd_rn(v, sums[w][i]);
    StoreOutput(__fdiv_rn(v, l), row * width + head * kHd + i, out, oq, od);
  }
}

// Rows of several chunks: the chunks' partials combined in chunk order, for each (row, query head), from
// either kernel. One block of kTile threads for each row and `heads` query heads: one, or with a shadow
// in groups of og = 256 values (AttnShadowGroups) the 256 / hd heads of a group (at most kTile / 32).
constexpr int kCombineMaxHeads = kTile / 32;
__host__ __device__ constexpr int CombineHeads(int64_t hd, int og) {
  return og == 32 || hd >= og ? 1 : static_cast<int>(og / hd);
}
__global__ void __launch_bounds__(kTile)
    CombineChunks(DeviceBatch b, const float* part, int64_t n_head, int64_t hd, float* out, int8_t* oq,
                  float* od, int og) {
  __shared__ float weight[kCombineMaxHeads][kAttnMaxChunks];  // each chunk's exp(max_c - max)
  __shared__ float norm[kCombineMaxHeads];
  __shared__ float scratch[kTile / 32];
  const int heads = CombineHeads(hd, oq != nullptr ? og : 32);
  const int64_t row = blockIdx.x, head0 = static_cast<int64_t>(blockIdx.y) * heads;
  const int n_chunks = static_cast<int>(AttnChunks(static_cast<int64_t>(b.positions[row]) + 1));
  if (n_chunks == 1) {  // written by the attention kernel; still ordered after it for the next kernel
    WaitForPrevious();
    return;
  }
  AfterPrevious();
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  auto partials = [&](int64_t h) { return part + (row * n_head + head0 + h) * kAttnMaxChunks * (hd + 2); };
  // Warp h: head h's chunk maxima and normalizers, read at once (one load each, in flight together),
  // then folded in chunk order.
  if (warp < heads) {
    const float* pr = partials(warp);
    const float mc = lane < n_chunks ? pr[lane * (hd + 2) + hd] : -FLT_MAX;
    const float lc = lane < n_chunks ? pr[lane * (hd + 2) + hd + 1] : 0.0f;
    float mx = mc;
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, m));
    const float w = expf(mc - mx);
    if (lane < n_chunks) weight[warp][lane] = w;
    float l = 0.0f;
    for (int k = 0; k < n_chunks; ++k)
      l = __fmaf_rn(__shfl_sync(0xffffffffu, lc, k), __shfl_sync(0xffffffffu, w, k), l);
    if (lane == 0) norm[warp] = l;
  }
  __syncthreads();
  // Element i of the block's heads (hd is a multiple of 32: whole warps).
  auto combined = [&](int64_t i) {
    const int64_t h = i / hd, e = i % hd;
    const float* pr = partials(h);
    float v[kAttnMaxChunks];
#pragma unroll
    for (int c = 0; c < kAttnMaxChunks; ++c) v[c] = c < n_chunks ? pr[c * (hd + 2) + e] : 0.0f;
    float a = 0.0f;
#pragma unroll
    for (int c = 0; c < kAttnMaxChunks; ++c) {
      if (c < n_chunks) a = __fmaf_rn(v[c], weight[h][c], a);
    }
    return __fdiv_rn(a, norm[h]);
  };
  const int64_t e0 = row * n_head * hd + head0 * hd;
  if (heads * hd == kKQuantGroup && oq != nullptr && og == kKQuantGroup) {
    float v[kKQuantGroup / kTile];
#pragma unroll
    for (int k = 0; k < kKQuantGroup / kTile; ++k) v[k] = combined(threadIdx.x + k * kTile);
    StoreGroup(v, e0, static_cast<int>(threadIdx.x), scratch, out, oq, od);
    return;
  }
  for (int64_t i = threadIdx.x; i < heads * hd; i += kTile) StoreOutput(combined(i), e0 + i, out, oq, od);
}

// Shared memory of a staged block: the tile's keys (rows padded) and values, twice (the next tile's
// copies land while this one is read) for head sizes up to 128.
template <typename T, int kDims>
constexpr int StagedBytes() {
  return (kDims <= 4 ? 2 : 1) *
         (kTile * (kDims * 32 + 16 / static_cast<int>(sizeof(T))) * static_cast<int>(sizeof(T)) +
          kTile * kDims * 32 * static_cast<int>(sizeof(T)));
}

// What every attention kernel is given.
struct AttnArgs {
  DeviceKv kv;
  DeviceBatch b;
  int64_t layer, rows, n_head, chunks;  // chunks: the most of any row (the grid's third dimension)
  const float* q;
  float scale;
  float *out, *od, *part;
  int8_t* oq;
  int og;
};

// The staged kernel for `group` query heads per KV head (f16 caches, groups of 2..8 heads); false
// when there is no such variant, and the per-head kernel runs.
template <int kDims, int kHeads>
bool LaunchStagedAs(const AttnArgs& a, cudaStream_t stream, cudaError_t* err) {
  constexpr int kBytes = StagedBytes<__half, kDims>();
  auto kernel = AttentionWarpKernel<__half, kDims, kHeads, true>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (attr != cudaSuccess) {
    *err = attr;
    return true;
  }
  const dim3 grid(static_cast<unsigned>(a.rows), static_cast<unsigned>(a.kv.n_kv_head),
                  static_cast<unsigned>(a.chunks));
  *err = Launch(kernel, grid, kTile * kHeads, kBytes, stream, a.kv, a.b, a.layer, a.q, a.n_head, a.scale,
                a.out, a.oq, a.od, a.og, a.part);
  return true;
}

template <int kDims>
bool LaunchStaged(const AttnArgs& a, cudaStream_t stream, cudaError_t* err) {
  switch (a.n_head / a.kv.n_kv_head) {
    case 2: return LaunchStagedAs<kDims, 2>(a, stream, err);
    case 4: return LaunchStagedAs<kDims, 4>(a, stream, err);
    case 6: return LaunchStagedAs<kDims, 6>(a, stream, err);
    case 7: return LaunchStagedAs<kDims, 7>(a, stream, err);
    case 8: return LaunchStagedAs<kDims, 8>(a, stream, err);
    default: return false;
  }
}

constexpr int64_t kStagedMinRows = 2;  // batches of this many rows stage keys and values (same bits)

template <typename T>
cudaError_t LaunchAttention(const AttnArgs& a, cudaStream_t stream) {
  if constexpr (sizeof(T) == 2) {
    cudaError_t err = cudaSuccess;
    if (a.rows >= kStagedMinRows) {
      if (a.kv.head_dim == 64 && LaunchStaged<2>(a, stream, &err)) return err;
      if (a.kv.head_dim == 128 && LaunchStaged<4>(a, stream, &err)) return err;
      if (a.kv.head_dim == 256 && LaunchStaged<8>(a, stream, &err)) return err;
    }
  }
  const dim3 grid(static_cast<unsigned>(a.rows), static_cast<unsigned>(a.n_head),
                  static_cast<unsigned>(a.chunks));
  auto kernel = AttentionWarpKernel<T, 2, 1, false>;
  switch (a.kv.head_dim) {
    case 64: break;
    case 128: kernel = AttentionWarpKernel<T, 4, 1, false>; break;
    case 256: kernel = AttentionWarpKernel<T, 8, 1, false>; break;
    default:  // other head sizes: one block walks the whole context (a.chunks is 1)
      return Launch(AttentionKernel<T>, grid, kTile, 0, stream, a.kv, a.b, a.layer, a.q, a.n_head, a.scale,
                    a.out, a.oq, a.od);
  }
  return Launch(kernel, grid, kTile, 0, stream, a.kv, a.b, a.layer, a.q, a.n_head, a.scale, a.out, a.oq, a.od,
                a.og, a.part);
}

}  // namespace

cudaError_t Attention(const DeviceKv& kv, const DeviceBatch& b, int64_t layer, const float* q, int64_t rows,
                      int64_t n_head, float scale, float* out, int8_t* oq, float* od, int og, int64_t max_ctx,
                      float* part, int64_t n_groups, int64_t group_rows, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (kv.head_dim > kMaxHeadDim || kv.n_kv_head <= 0 || n_head % kv.n_kv_head != 0)
    return cudaErrorInvalidValue;
  const int64_t group = n_head / kv.n_kv_head;
  if (oq != nullptr && og != 32 && (og != kKQuantGroup || !AttnShadowGroups(kv.f32, kv.head_dim, group)))
    return cudaErrorInvalidValue;
  const bool split = AttnPartFloats(rows, n_head, kv.head_dim, max_ctx) > 0;
  if (split && part == nullptr) return cudaErrorInvalidValue;
  const int64_t chunks = split ? AttnGridChunks(max_ctx) : 1;
  cudaError_t e = cudaSuccess;
  if (AttnOnTensorCores(kv.f32, kv.head_dim, group)) {
    if (b.attn_groups == nullptr) return cudaErrorInvalidValue;
    e = AttentionMma(kv, b, layer, q, n_head, scale, out, oq, od, og, part, n_groups, group_rows, chunks,
                     stream);
  } else {
    const AttnArgs a{kv, b, layer, rows, n_head, chunks, q, scale, out, od, part, oq, og};
    e = kv.f32 ? LaunchAttention<float>(a, stream) : LaunchAttention<__half>(a, stream);
  }
  if (e != cudaSuccess || !split) return e;
  const int heads = CombineHeads(kv.head_dim, oq != nullptr ? og : 32);
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(n_head / heads));
  return Launch(CombineChunks, grid, kTile, 0, stream, b, static_cast<const float*>(part), n_head,
                kv.head_dim, out, oq, od, og);
}

}  // namespace fak::cuda
