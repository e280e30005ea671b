// Paged causal attention on the tensor cores, for f16 caches with head sizes 64 and 128 (kernels.h's
// AttnOnTensorCores): the flash-attention scheme with mma.sync m16n8k16 (f16 operands, f32 sums).
//
// A block computes one attention group (kernels.h: up to 16 consecutive rows of one sequence) for one
// KV head and one chunk of positions. Its items are the group's (row, query head) pairs of that KV
// head, 16 per warp as the rows of the mma tiles (WarpItems; a group of at most 16 items, a decode
// row's, instead shares its one tile over kHd / 32 warps: SplitTile); the chunk's keys and values are copied
// into shared memory 64 positions at a time (cp.async, the next tile while this one is computed) once for
// every item. Per tile and item: scores S = q . k over the head dims (q rounded to f16) times the scale,
// positions past the item's context masked, an online softmax (the tile's maximum, probabilities
// exp(s - max) rounded to f16, their sum taken from the rounded values in a fixed order), and the tile's
// P . V computed from zero and added as acc * alpha + PV. An item whose context ends before a tile
// skips the tile's updates, so its state is what it would be alone; inside a tile, its positions past
// its context weigh values of the group's later rows by exactly 0 (finite values: a model whose values
// overflowed is stopped by the finiteness checks, and positions past the chunk are zeros).
//
// Every value an item's result depends on (its q, its sequence's keys and values, tile and chunk
// bounds at fixed multiples of 64 positions and of its chunk length) is the same whatever else the
// block computes: the tensor cores compute each output element from its own row and column (what the
// hardware does; PTX does not state it, and the alone-and-in-a-batch tests check it). A row's
// result is therefore the same bits alone, as a decode row, and inside any prefill chunk or batch.
//
// Napkin math (H200, 1.5B geometry, 256 prompt rows over a 2,048-position cache): 256 x 12 heads x
// 2,048 positions x 128 dims x 2 (keys and values) = 1.6 G multiply-adds per layer, ~3 us at the tensor
// cores' mma.sync rate against ~0.7 ms of f32 FMAs in the staged kernel of attention.cu.
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <vector>

#include "backends/cuda/async_copy.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/kv_pages.cuh"
#include "backends/cuda/pdl.cuh"

namespace fak::cuda {
namespace {

constexpr int kPos = 64;      // positions per tile
constexpr int kMaxWarps = 8;  // a group's items: kAttnGroupRows rows x 8 heads / 16 per warp
constexpr int kNTiles = kPos / 8;

__device__ __forceinline__ uint32_t PackHalves(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// d += a . b for one m16n8k16 tile (f16 in, f32 sums).
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 b16 matrices from shared memory; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void LoadMatrices(uint32_t (&r)[4], const __half* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void LoadMatricesT(uint32_t (&r)[4], const __half* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

__device__ __forceinline__ float QuadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float QuadSum(float v) {
  v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// N consecutive floats of shared memory (p aligned to 4 N bytes for N of 2 or 4, to 16 beyond) in 8- or
// 16-byte loads.
template <int N>
__device__ __forceinline__ void LoadRun(const float* p, float (&v)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const float4 x = *reinterpret_cast<const float4*>(p + i);
      v[i] = x.x, v[i + 1] = x.y, v[i + 2] = x.z, v[i + 3] = x.w;
    }
  } else {
    static_assert(N == 2, "runs of 2 or of a multiple of 4");
    const float2 x = *reinterpret_cast<const float2*>(p);
    v[0] = x.x, v[1] = x.y;
  }
}

// Lane l of a warp holds, in every m16n8 tile, rows g = l / 4 and g + 8 (its two items) and columns
// 2t, 2t + 1 with t = l % 4: accumulator e is row g + 8 (e / 2), column 2t + e % 2.
struct Lane {
  int lane, warp, g, t;
};

// What both ways of computing a block share: its chunk [begin, end) and its two items per lane (row,
// query head, context, and where its positions in this chunk end).
struct Items {
  int begin, end;
  int row[2], head[2], ctx[2], rend[2];
};

template <int kHd>
struct Smem {
  static constexpr int kStride = kHd + 8;  // halves per staged row: ldmatrix rows land in distinct banks
  static constexpr int kTileHalves = kPos * kStride;
  static constexpr int kPStride = kPos + 8;
  static constexpr int kBytes = 2 * 2 * kTileHalves * 2;  // two buffers of keys and values
};

// Per tile: the items' scores for 8-position column tiles [j0, j0 + kJ) as s[j - j0], scaled, with the
// positions past each item's end at -FLT_MAX; returns the lane's maxima of both items.
template <int kHd, int kJ>
__device__ __forceinline__ void Scores(const __half* kb, const uint32_t (&qa)[kHd / 16][4], const Lane& ln,
                                       const Items& it, int t0, int j0, float scale, float (&s)[kJ][4],
                                       float (&mx)[2]) {
  constexpr int kStride = Smem<kHd>::kStride;
#pragma unroll
  for (int j = 0; j < kJ; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
  for (int k = 0; k < kHd / 16; k += 2) {
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      uint32_t r[4];
      LoadMatrices(r, kb + (8 * (j0 + j) + (ln.lane & 7)) * kStride + 16 * k + 8 * (ln.lane >> 3));
      Mma(s[j], qa[k], r[0], r[1]);
      Mma(s[j], qa[k + 1], r[2], r[3]);
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = -FLT_MAX;
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int pos = t0 + 8 * (j0 + j) + 2 * ln.t + e;
        float& v = s[j][2 * h + e];
        v = pos < it.rend[h] ? __fmul_rn(v, scale) : -FLT_MAX;
        mx[h] = fmaxf(mx[h], v);
      }
    }
  }
}

// The probabilities of column tile j (both items) rounded to f16, as the two halves of an A operand, and
// each item's sum of the rounded values over the tile (the same in the quad's four lanes).
__device__ __forceinline__ void Probabilities(const float (&s)[4], const float (&m_new)[2], const Items& it,
                                              int pos, uint32_t (&ph)[2], float (&sum)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float p0 = pos < it.rend[h] ? expf(s[2 * h] - m_new[h]) : 0.0f;
    const float p1 = pos + 1 < it.rend[h] ? expf(s[2 * h + 1] - m_new[h]) : 0.0f;
    const __half2 hp = __floats2half2_rn(p0, p1);
    const float2 pr = __half22float2(hp);
    ph[h] = *reinterpret_cast<const uint32_t*>(&hp);
    sum[h] = QuadSum(__fadd_rn(pr.x, pr.y));
  }
}

// acc = acc * alpha + P . V for the column-tile pair dp of the output (dims 16 dp ..), each item that
// has positions in this tile.
template <int kHd>
__device__ __forceinline__ void AddValues(const __half* vb, const uint32_t (&pa)[kNTiles / 2][4], int dp,
                                          const Lane& ln, const bool (&live)[2], const float (&alpha)[2],
                                          float (&acc0)[4], float (&acc1)[4]) {
  constexpr int kStride = Smem<kHd>::kStride;
  float pv[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
  for (int k = 0; k < kNTiles / 2; ++k) {
    uint32_t r[4];
    LoadMatricesT(
        r, vb + (16 * k + (ln.lane & 7) + 8 * ((ln.lane >> 3) & 1)) * kStride + 16 * dp + 8 * (ln.lane >> 4));
    Mma(pv[0], pa[k], r[0], r[1]);
    Mma(pv[1], pa[k], r[2], r[3]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if (!live[e >> 1]) continue;
    acc0[e] = __fmaf_rn(acc0[e], alpha[e >> 1], pv[0][e]);
    acc1[e] = __fmaf_rn(acc1[e], alpha[e >> 1], pv[1][e]);
  }
}

// Barrier 1 of the block's first `threads` threads (barrier 0 is __syncthreads).
__device__ __forceinline__ void SyncFirst(int threads) { asm volatile("bar.sync 1, %0;" ::"r"(threads)); }

// Writes the lane's dims of both items, column tiles [4 w, 4 w + kD) of warp w of kW that share the
// items (kD a multiple of 4: whole 32-dim shadow blocks): an item of one chunk its output and shadow,
// an item of several its partials. The shadow's scales are per 32 values (og 32) or per og = 256 values
// of a row (kernels.h's AttnShadowGroups): 256 / kHd consecutive heads, the items of lanes g, g ^ 1 (and
// g ^ 2, g ^ 3 at head size 64), whose quads are 4 (and 8) lanes apart; warps that share the items
// (SplitTile, kW > 1) meet in `red` behind barrier 1. The group's largest magnitude is exact in any
// order, so the bits are those of the quantize kernel's groups.
template <int kHd, int kD, int kW>
__device__ __forceinline__ void Finish(const float (&acc)[kD][4], int w, const float (&m)[2],
                                       const float (&l)[2], const Items& it, const Lane& ln, int n_head,
                                       float* out, int8_t* oq, float* od, int og, float* red, float* part) {
  const int d0 = kW > 1 ? 4 * w : 0;
  const int64_t width = static_cast<int64_t>(n_head) * kHd;
  float v[2][kD][2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int d = 0; d < kD; ++d) {
      v[h][d][0] = __fdiv_rn(acc[d][2 * h], l[h]);
      v[h][d][1] = __fdiv_rn(acc[d][2 * h + 1], l[h]);
    }
  }
  float gmax[2] = {0.0f, 0.0f};
  if (oq != nullptr && og != 32) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float a = 0.0f;
#pragma unroll
      for (int d = 0; d < kD; ++d) a = fmaxf(a, fmaxf(fabsf(v[h][d][0]), fabsf(v[h][d][1])));
      a = QuadMax(a);
      a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 4));
      if constexpr (kHd == 64) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 8));
      gmax[h] = a;
    }
    if constexpr (kW > 1) {
      if (ln.t == 0) red[ln.g * kW + w] = gmax[0], red[(ln.g + 8) * kW + w] = gmax[1];
      SyncFirst(kW * 32);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float r[kW];
        LoadRun(red + (ln.g + 8 * h) * kW, r);
#pragma unroll
        for (int k = 0; k < kW; ++k) gmax[h] = fmaxf(gmax[h], r[k]);
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const bool takes_part = it.ctx[h] > it.begin;  // false also for a warp's unused items
    const bool whole = takes_part && AttnChunks(it.ctx[h]) == 1;
    const int64_t e0 = it.row[h] * width + it.head[h] * kHd + 8 * d0 + 2 * ln.t;
    if (whole) {
#pragma unroll
      for (int d = 0; d < kD; ++d) *reinterpret_cast<float2*>(out + e0 + 8 * d) = {v[h][d][0], v[h][d][1]};
    }
    if (oq != nullptr) {
      // A 32-dim block is 4 column tiles, held by the 4 lanes of a quad.
#pragma unroll
      for (int blk = 0; blk < kD / 4; ++blk) {
        float amax = 0.0f;
#pragma unroll
        for (int d = 4 * blk; d < 4 * blk + 4; ++d)
          amax = fmaxf(amax, fmaxf(fabsf(v[h][d][0]), fabsf(v[h][d][1])));
        const float dv = ShadowScale(og == 32 ? QuadMax(amax) : gmax[h]);
        if (!whole) continue;
#pragma unroll
        for (int d = 4 * blk; d < 4 * blk + 4; ++d) {
          *reinterpret_cast<char2*>(oq + e0 + 8 * d) =
              char2{ShadowValue(v[h][d][0], dv), ShadowValue(v[h][d][1], dv)};
        }
        if (ln.t == 0) od[(e0 + 32 * blk) / 32] = dv;
      }
    }
    if (takes_part && !whole) {
      float* pr =
          part +
          ((static_cast<int64_t>(it.row[h]) * n_head + it.head[h]) * kAttnMaxChunks + blockIdx.z) * (kHd + 2);
#pragma unroll
      for (int d = 0; d < kD; ++d) {
        pr[8 * (d0 + d) + 2 * ln.t] = acc[d][2 * h];
        pr[8 * (d0 + d) + 2 * ln.t + 1] = acc[d][2 * h + 1];
      }
      if (ln.t == 0 && d0 == 0) pr[kHd] = m[h], pr[kHd + 1] = l[h];
    }
  }
}

// One step of the tiles' double buffering: starts the copy of the tile after t0 into the other buffer
// (last read in the tile before this one; past the chunk's end, an empty copy group), waits for t0's
// tile in buffer buf, and returns its keys (its values follow them).
template <int kHd, typename Issue>
__device__ __forceinline__ const __half* AwaitTile(const __half* staged, int t0, int end, int buf,
                                                   Issue& issue) {
  if (t0 + kPos < end) {
    issue(t0 + kPos, buf ^ 1);
  } else {
    CopyCommit();
  }
  CopyWait<1>();
  __syncthreads();
  return staged + buf * 2 * Smem<kHd>::kTileHalves;
}

// Groups of more than 16 items (prompt rows): warp w computes items 16w .. 16w + 15 whole.
template <int kHd, typename Issue>
__device__ __forceinline__ void WarpItems(const __half* staged, const uint32_t (&qa)[kHd / 16][4],
                                          const Lane& ln, const Items& it, float scale, int n_head,
                                          float* out, int8_t* oq, float* od, int og, float* part,
                                          Issue&& issue) {
  constexpr int kTileHalves = Smem<kHd>::kTileHalves;
  float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.0f, 0.0f};
  float acc[kHd / 8][4];
#pragma unroll
  for (int d = 0; d < kHd / 8; ++d) acc[d][0] = acc[d][1] = acc[d][2] = acc[d][3] = 0.0f;
  int buf = 0;
  for (int t0 = it.begin; t0 < it.end; t0 += kPos, buf ^= 1) {
    const __half* kb = AwaitTile<kHd>(staged, t0, it.end, buf, issue);
    float s[kNTiles][4], mx[2];
    Scores<kHd, kNTiles>(kb, qa, ln, it, t0, 0, scale, s, mx);
    bool live[2];
    float m_new[2], alpha[2], lsum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      live[h] = t0 < it.rend[h];
      m_new[h] = fmaxf(m[h], QuadMax(mx[h]));
      alpha[h] = expf(m[h] - m_new[h]);
    }
    uint32_t pa[kNTiles / 2][4];
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
      uint32_t ph[2];
      float sum[2];
      Probabilities(s[j], m_new, it, t0 + 8 * j + 2 * ln.t, ph, sum);
      pa[j / 2][(j % 2) * 2 + 0] = ph[0];
      pa[j / 2][(j % 2) * 2 + 1] = ph[1];
      lsum[0] = __fadd_rn(lsum[0], sum[0]);
      lsum[1] = __fadd_rn(lsum[1], sum[1]);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!live[h]) continue;
      l[h] = __fmaf_rn(l[h], alpha[h], lsum[h]);
      m[h] = m_new[h];
    }
    const __half* vb = kb + kTileHalves;
#pragma unroll
    for (int dp = 0; dp < kHd / 16; ++dp)
      AddValues<kHd>(vb, pa, dp, ln, live, alpha, acc[2 * dp], acc[2 * dp + 1]);
    __syncthreads();  // this buffer is refilled two tiles on
  }
  Finish<kHd, kHd / 8, 1>(acc, 0, m, l, it, ln, n_head, out, oq, od, og, nullptr, part);
}

// Groups of up to 16 items (decode rows): the first kHd / 32 warps share the one tile of items, warp w
// taking column tiles of positions [w kJ, (w + 1) kJ) for the scores and dims [32w, 32w + 32) for
// P . V; maxima, sums and probabilities pass through shared memory. Each item's arithmetic is
// WarpItems's: the same scores, the tile's maximum (exact in any order), the per-column-tile sums
// added in column order, the same P . V per dim.
template <int kHd, typename Issue>
__device__ __forceinline__ void SplitTile(const __half* staged, __half* ps, float* red,
                                          const uint32_t (&qa)[kHd / 16][4], const Lane& ln, const Items& it,
                                          float scale, int n_head, float* out, int8_t* oq, float* od, int og,
                                          float* part, Issue&& issue) {
  constexpr int kTileHalves = Smem<kHd>::kTileHalves, kPStride = Smem<kHd>::kPStride;
  constexpr int kW = kHd / 32, kJ = kNTiles / kW;
  // Item-major, so an item's kW maxima and kNTiles sums are read in one or two vector loads (and then
  // folded in the same order as one by one).
  float* red_max = red;            // [16][kW]
  float* red_sum = red + kW * 16;  // [16][kNTiles]
  const bool computes = ln.warp < kW;
  const int w = computes ? ln.warp : 0;
  float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.0f, 0.0f};
  float acc[4][4];
#pragma unroll
  for (int d = 0; d < 4; ++d) acc[d][0] = acc[d][1] = acc[d][2] = acc[d][3] = 0.0f;
  int buf = 0;
  for (int t0 = it.begin; t0 < it.end; t0 += kPos, buf ^= 1) {
    const __half* kb = AwaitTile<kHd>(staged, t0, it.end, buf, issue);
    float s[kJ][4], mx[2];
    if (computes) {
      Scores<kHd, kJ>(kb, qa, ln, it, t0, w * kJ, scale, s, mx);
      const float m0 = QuadMax(mx[0]), m1 = QuadMax(mx[1]);
      if (ln.t == 0) {
        red_max[ln.g * kW + w] = m0;
        red_max[(ln.g + 8) * kW + w] = m1;
      }
    }
    __syncthreads();
    bool live[2];
    float m_new[2], alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float maxima[kW];
      LoadRun(red_max + (ln.g + 8 * h) * kW, maxima);
      float tile_max = maxima[0];
#pragma unroll
      for (int v = 1; v < kW; ++v) tile_max = fmaxf(tile_max, maxima[v]);
      live[h] = t0 < it.rend[h];
      m_new[h] = fmaxf(m[h], tile_max);
      alpha[h] = expf(m[h] - m_new[h]);
    }
    if (computes) {
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        const int jj = w * kJ + j;
        uint32_t ph[2];
        float sum[2];
        Probabilities(s[j], m_new, it, t0 + 8 * jj + 2 * ln.t, ph, sum);
        *reinterpret_cast<uint32_t*>(ps + ln.g * kPStride + 8 * jj + 2 * ln.t) = ph[0];
        *reinterpret_cast<uint32_t*>(ps + (ln.g + 8) * kPStride + 8 * jj + 2 * ln.t) = ph[1];
        if (ln.t == 0) {
          red_sum[ln.g * kNTiles + jj] = sum[0];
          red_sum[(ln.g + 8) * kNTiles + jj] = sum[1];
        }
      }
    }
    __syncthreads();
    if (computes) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (!live[h]) continue;
        float sums[kNTiles];
        LoadRun(red_sum + (ln.g + 8 * h) * kNTiles, sums);
        float lsum = 0.0f;
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) lsum = __fadd_rn(lsum, sums[j]);
        l[h] = __fmaf_rn(l[h], alpha[h], lsum);
        m[h] = m_new[h];
      }
      uint32_t pa[kNTiles / 2][4];
#pragma unroll
      for (int k = 0; k < kNTiles / 2; ++k) {
        LoadMatrices(
            pa[k], ps + ((ln.lane & 7) + 8 * ((ln.lane >> 3) & 1)) * kPStride + 16 * k + 8 * (ln.lane >> 4));
      }
      const __half* vb = kb + kTileHalves;
#pragma unroll
      for (int u = 0; u < 2; ++u)
        AddValues<kHd>(vb, pa, 2 * w + u, ln, live, alpha, acc[2 * u], acc[2 * u + 1]);
    }
    __syncthreads();  // shared sums, probabilities and this buffer are rewritten
  }
  // The loop's last barrier ended every read of red: Finish may take it for the shadow's group maxima.
  if (computes) Finish<kHd, 4, kW>(acc, w, m, l, it, ln, n_head, out, oq, od, og, red, part);
}

// kSplitOnly: every group of the launch has at most 16 items (decode rows), so only SplitTile is
// compiled in: half the code, which a launch of a few blocks fetches cold into each multiprocessor.
template <int kHd, bool kSplitOnly>
__global__ void __launch_bounds__(kMaxWarps * 32)
    AttentionMmaKernel(DeviceKv kv, DeviceBatch b, int64_t layer, const float* q, int n_head, float scale,
                       float* out, int8_t* oq, float* od, int og, float* part) {
  constexpr int kStride = Smem<kHd>::kStride, kTileHalves = Smem<kHd>::kTileHalves;
  extern __shared__ __align__(16) __half staged[];
  __shared__ __align__(16) __half ps[16 * Smem<kHd>::kPStride];   // SplitTile's probabilities
  __shared__ __align__(16) float red[(kHd / 32 + kNTiles) * 16];  // and its maxima and sums
  const Lane ln{static_cast<int>(threadIdx.x & 31), static_cast<int>(threadIdx.x >> 5),
                static_cast<int>((threadIdx.x & 31) >> 2), static_cast<int>(threadIdx.x & 3)};
  // Before the wait: the group, its chunk, and the items' contexts (the batch arrays are uploaded before
  // the step's kernels and written by none).
  const int32_t* grp = b.attn_groups + 3 * blockIdx.x;
  const int row0 = grp[0], nrows = grp[1], first_new = grp[2];
  const int kvh = static_cast<int>(blockIdx.y);
  const int group = n_head / static_cast<int>(kv.n_kv_head);
  const bool split = kSplitOnly || nrows * group <= 16;
  int gctx = 0;
  for (int r = 0; r < nrows; ++r) gctx = max(gctx, b.positions[row0 + r] + 1);
  const int len = static_cast<int>(AttnChunkLen(gctx));  // every row of the group has this one
  Items it;
  it.begin = static_cast<int>(blockIdx.z) * len;
  if (it.begin >= gctx) return;
  it.end = min(it.begin + len, gctx);
  for (int h = 0; h < 2; ++h) {
    const int item = (split ? 0 : ln.warp * 16) + ln.g + 8 * h;
    const bool ok = item < nrows * group;
    it.row[h] = row0 + (ok ? item / group : 0);
    it.head[h] = kvh * group + (ok ? item % group : 0);
    it.ctx[h] = ok ? b.positions[it.row[h]] + 1 : 0;
    it.rend[h] = min(it.ctx[h], it.begin + len);  // the item's positions in this chunk end here
  }
  const int32_t* table = b.pages + b.page_begin[b.row_seq[row0]];
  const int64_t kv_block = kv.page_tokens * kHd;
  const int64_t k_off = ((layer * 2 + 0) * kv.n_kv_head + kvh) * kv_block;
  const int64_t v_off = ((layer * 2 + 1) * kv.n_kv_head + kvh) * kv_block;
  // Copies the keys and values of positions [t0, t0 + kPos) (zeros past the chunk) into buffer buf; a
  // thread always copies the same 16-byte piece of its rows, rows j0, j0 + step, ... of the tile. A warp
  // copies kRows rows a pass and at most 8 passes, so at most 32 rows a tile: each lane finds the address
  // of one of them (its page-table and page-address reads; lanes past the warp's rows repeat the first
  // ones), and every lane takes the row of each pass from the lane that found it, by a shuffle. The
  // reads of a tile are all in flight together, and each row's address is worked out once per warp
  // instead of once per thread that copies from it.
  const int end = it.end;
  constexpr int kParts = kHd / 8;                    // 16-byte pieces a row
  constexpr int kRows = 32 / kParts;                 // rows a warp copies a pass
  constexpr int kMaxPasses = kPos / (kHd / kParts);  // kernels have at least kHd threads: step >= 8
  static_assert(kRows * kMaxPasses <= 32, "a warp's rows of a tile fit its lanes");
  const int piece = static_cast<int>(threadIdx.x) % kParts, j0 = static_cast<int>(threadIdx.x) / kParts;
  // A launch of decode groups only has kHd / 32 warps (LaunchMma), so its step is known here.
  const int step = kSplitOnly ? kHd / kParts : static_cast<int>(blockDim.x) / kParts;
  // The row this lane finds: pass m_find's row h_find of its warp.
  const int find = ln.lane % (kRows * kMaxPasses), m_find = find / kRows, h_find = find % kRows;
  const int j_find = kRows * ln.warp + h_find + m_find * step;
  // Rows past the chunk copy nothing but name a row that exists: the chunk's first.
  const int begin = it.begin;
  auto issue = [&](int t0, int buf) {
    __half* kb = staged + buf * 2 * kTileHalves;
    __half* vb = kb + kTileHalves;
    const int pos = t0 + j_find;
    const auto found =
        reinterpret_cast<unsigned long long>(PositionRow<__half>(kv, table, pos < end ? pos : begin, kHd));
#pragma unroll
    for (int m = 0; m < kMaxPasses; ++m) {
      if (m * step >= kPos) break;  // the same for every thread: more threads, fewer passes
      const __half* at =
          reinterpret_cast<const __half*>(__shfl_sync(0xffffffffu, found, m * kRows + ln.lane / kParts)) +
          piece * 8;
      const int j = j0 + m * step;
      if (j < kPos) {
        const bool valid = t0 + j < end;
        CopyAsync16(kb + j * kStride + piece * 8, at + k_off, valid);
        CopyAsync16(vb + j * kStride + piece * 8, at + v_off, valid);
      }
    }
    CopyCommit();
  };
  // Positions before the sequence's first row of this batch were written by earlier steps: their copy
  // may start while the kernel that writes this step's keys and values is still running.
  const bool early = it.begin + kPos <= first_new;
  if (early) issue(it.begin, 0);
  AfterPrevious();
  if (!early) issue(it.begin, 0);

  // The items' queries as mma A operands, rounded to f16.
  uint32_t qa[kHd / 16][4];
  {
    const int64_t width = static_cast<int64_t>(n_head) * kHd;
    const float* qp[2];
    for (int h = 0; h < 2; ++h) qp[h] = q + it.row[h] * width + it.head[h] * kHd + 2 * ln.t;
#pragma unroll
    for (int k = 0; k < kHd / 16; ++k) {
      float2 x[2][2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool ok = it.ctx[h] > 0;
        x[h][0] = ok ? *reinterpret_cast<const float2*>(qp[h] + 16 * k) : float2{0.0f, 0.0f};
        x[h][1] = ok ? *reinterpret_cast<const float2*>(qp[h] + 16 * k + 8) : float2{0.0f, 0.0f};
      }
      qa[k][0] = PackHalves(x[0][0].x, x[0][0].y);
      qa[k][1] = PackHalves(x[1][0].x, x[1][0].y);
      qa[k][2] = PackHalves(x[0][1].x, x[0][1].y);
      qa[k][3] = PackHalves(x[1][1].x, x[1][1].y);
    }
  }
  if (split) {
    SplitTile<kHd>(staged, ps, red, qa, ln, it, scale, n_head, out, oq, od, og, part, issue);
  } else if constexpr (!kSplitOnly) {
    WarpItems<kHd>(staged, qa, ln, it, scale, n_head, out, oq, od, og, part, issue);
  }
}

template <int kHd, bool kSplitOnly>
cudaError_t LaunchMmaKernel(const DeviceKv& kv, const DeviceBatch& b, int64_t layer, const float* q,
                            int64_t n_head, float scale, float* out, int8_t* oq, float* od, int og,
                            float* part, const dim3& grid, int64_t warps, cudaStream_t stream) {
  constexpr int kBytes = Smem<kHd>::kBytes;
  static const cudaError_t attr = cudaFuncSetAttribute(AttentionMmaKernel<kHd, kSplitOnly>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (attr != cudaSuccess) return attr;
  return Launch(AttentionMmaKernel<kHd, kSplitOnly>, grid, static_cast<unsigned>(warps * 32), kBytes, stream,
                kv, b, layer, q, static_cast<int>(n_head), scale, out, oq, od, og, part);
}

template <int kHd>
cudaError_t LaunchMma(const DeviceKv& kv, const DeviceBatch& b, int64_t layer, const float* q, int64_t n_head,
                      float scale, float* out, int8_t* oq, float* od, int og, float* part, int64_t n_groups,
                      int64_t group_rows, int64_t chunks, cudaStream_t stream) {
  const int64_t group = n_head / kv.n_kv_head;
  // Enough warps for the largest group's items, and at least the kHd / 32 that share a decode tile.
  const int64_t warps = std::max<int64_t>((group_rows * group + 15) / 16, kHd / 32);
  if (warps > kMaxWarps) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(n_groups), static_cast<unsigned>(kv.n_kv_head),
                  static_cast<unsigned>(chunks));
  if (group_rows * group <= 16) {
    return LaunchMmaKernel<kHd, true>(kv, b, layer, q, n_head, scale, out, oq, od, og, part, grid, warps,
                                      stream);
  }
  return LaunchMmaKernel<kHd, false>(kv, b, layer, q, n_head, scale, out, oq, od, og, part, grid, warps,
                                     stream);
}

}  // namespace

int64_t AttnGroups(const int32_t* positions, const int32_t* row_seq, int64_t rows, int64_t n_seqs,
                   std::vector<int32_t>* groups) {
  std::vector<int32_t> first(static_cast<size_t>(std::max<int64_t>(n_seqs, 0)), INT32_MAX);
  for (int64_t r = 0; r < rows; ++r) {
    if (row_seq[r] >= 0 && row_seq[r] < n_seqs) {
      int32_t& f = first[static_cast<size_t>(row_seq[r])];
      f = std::min(f, positions[r]);
    }
  }
  int64_t most = 0;
  for (int64_t r = 0; r < rows;) {
    const int64_t len = AttnChunkLen(int64_t{positions[r]} + 1);
    int64_t n = 1;
    while (r + n < rows && n < kAttnGroupRows && row_seq[r + n] == row_seq[r] &&
           AttnChunkLen(int64_t{positions[r + n]} + 1) == len) {
      ++n;
    }
    const int32_t s = row_seq[r];
    groups->insert(groups->end(), {static_cast<int32_t>(r), static_cast<int32_t>(n),
                                   s >= 0 && s < n_seqs ? first[static_cast<size_t>(s)] : 0});
    most = std::max(most, n);
    r += n;
  }
  return most;
}

cudaError_t AttentionMma(const DeviceKv& kv, const DeviceBatch& b, int64_t layer, const float* q,
                         int64_t n_head, float scale, float* out, int8_t* oq, float* od, int og, float* part,
                         int64_t n_groups, int64_t group_rows, int64_t chunks, cudaStream_t stream) {
  if (n_groups <= 0) return cudaSuccess;
  if (oq != nullptr && og != 32 &&
      (og != kKQuantGroup || !AttnShadowGroups(false, kv.head_dim, n_head / kv.n_kv_head)))
    return cudaErrorInvalidValue;
  if (kv.head_dim == 64) {
    return LaunchMma<64>(kv, b, layer, q, n_head, scale, out, oq, od, og, part, n_groups, group_rows, chunks,
                         stream);
  }
  if (kv.head_dim == 128) {
    return LaunchMma<128>(kv, b, layer, q, n_head, scale, out, oq, od, og, part, n_groups, group_rows, chunks,
                          stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace fak::cuda
