// Row-wise device functions shared by the standalone kernels of ops.cu and the tails of the
// matrix-vector kernel (matvec.cu), which run the op after a one-row product in the product's last
// block instead of as a launch of its own. Both call the same function with the same thread layout, so
// a row's result is the same bits either way. Inputs another block of the same grid may have just
// written are read with ld.global.cg (L2, never a stale L1 line); across kernels that costs nothing.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/kernels.h"
#include "backends/cuda/kv_pages.cuh"  // ShadowScale, ShadowValue
#include "backends/cuda/pdl.cuh"       // AfterPrevious

namespace fak::cuda {

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// One warp quantizes the 32-element block holding `v` (this lane's element i): q = round(v / d) with
// d = max|v| / 127.
__device__ __forceinline__ void QuantizeLane(float v, int64_t i, int8_t* q, float* d) {
  const float amax = WarpMax(fabsf(v));
  const float dv = amax / 127.0f;
  const float inv = dv > 0.0f ? 1.0f / dv : 0.0f;
  q[i] = static_cast<int8_t>(__float2int_rn(v * inv));
  if ((threadIdx.x & 31) == 0) d[i / 32] = dv;
}

// One warp quantizes a group of `blocks` (1..8) 32-element blocks that starts at element i0 of a
// row, from v[k] = element i0 + 32 k + lane: q = round(v / d), d = max|v| / 127 over the whole group,
// stored as the scale of each of its blocks (kernels.h's Q8Act with groups of 256).
__device__ __forceinline__ void QuantizeGroupWarp(const float (&v)[8], int blocks, int64_t i0, int8_t* q,
                                                  float* d) {
  const int lane = threadIdx.x & 31;
  float m = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) m = k < blocks ? fmaxf(m, fabsf(v[k])) : m;
  const float dv = WarpMax(m) / 127.0f;
  const float inv = dv > 0.0f ? 1.0f / dv : 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    if (k < blocks) q[i0 + 32 * k + lane] = static_cast<int8_t>(__float2int_rn(v[k] * inv));
  }
  if (lane < blocks) d[i0 / 32 + lane] = dv;
}

// The shadow of a row of `cols` (a multiple of 32) at y, element offset q_at in q and d, in groups of
// 256 (the last one shorter), a group per warp of the block's `warps`; y read back (other warps of the
// block wrote it, before a barrier).
__device__ __forceinline__ void QuantizeRowGroups(const float* y, int64_t cols, int8_t* q, float* d,
                                                  int64_t q_at, int warp, int warps) {
  const int lane = threadIdx.x & 31;
  const int64_t nb = cols / 32;
  for (int64_t g = warp; g * 8 < nb; g += warps) {
    const int blocks = static_cast<int>(nb - 8 * g < 8 ? nb - 8 * g : 8);
    float v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = k < blocks ? y[256 * g + 32 * k + lane] : 0.0f;
    QuantizeGroupWarp(v, blocks, q_at + 256 * g, q, d);
  }
}

// A grid of a block of kKQuantGroup threads per group of 256 values of a rows x cols tensor (the last
// group of a row shorter; cols a multiple of 32), a value a thread: this thread's element i (false past
// the row's end, where whole warps idle).
__device__ __forceinline__ bool GroupElement(int64_t cols, int64_t* i) {
  const int64_t per_row = (cols + kKQuantGroup - 1) / kKQuantGroup;
  const int64_t row = blockIdx.x / per_row, c = blockIdx.x % per_row * kKQuantGroup + threadIdx.x;
  *i = row * cols + c;
  return c < cols;
}

// The group's int8 shadow from its threads' values (0 past the row's end): the largest magnitude of the
// warps' through shared memory (exact in any order), then QuantizeGroupWarp's scale and values. Every
// thread of the block calls it (a barrier).
__device__ __forceinline__ void QuantizeGroupBlock(float v, bool in, int64_t i, int8_t* q, float* d) {
  __shared__ float warp_max[kKQuantGroup / 32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float m = WarpMax(fabsf(v));
  if (lane == 0) warp_max[warp] = m;
  __syncthreads();
  float amax = warp_max[0];
#pragma unroll
  for (int w = 1; w < kKQuantGroup / 32; ++w) amax = fmaxf(amax, warp_max[w]);
  const float dv = ShadowScale(amax);
  if (!in) return;
  q[i] = ShadowValue(v, dv);
  if (lane == 0) d[i / 32] = dv;
}

// y = x / rms(x) * w for one row of `cols`, by a block of any whole number of warps, with y's int8 shadow
// at q + q_at, d + q_at / 32 when q is not null. The order of the sum of squares is a function of cols
// alone: each 32-element run's squares (rounded) by an xor butterfly over its lanes, then the runs'
// sums one after another in run order. So the bits do not depend on the block's size, and the row op's
// own kernel (many warps) and the one-row product's tail (its four warps) agree. Warp w takes runs
// w, w + warps, ...: the first kRuns of them with x and w held in registers (all loads in flight
// together), the rest read again.
template <int kRuns>
__device__ __forceinline__ void RmsNormRow(const float* xr, const float* w, float* yr, int64_t cols,
                                           float eps, int8_t* q, float* d, int64_t q_at) {
  __shared__ float run_ss[kNormMaxRuns];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int runs = static_cast<int>((cols + 31) / 32);
  float v[kRuns], wv[kRuns];
#pragma unroll
  for (int j = 0; j < kRuns; ++j) {
    const int64_t i = static_cast<int64_t>(warp + j * warps) * 32 + lane;
    v[j] = i < cols ? __ldcg(xr + i) : 0.0f;
    wv[j] = i < cols ? w[i] : 0.0f;
  }
  auto run_sum = [&](float x) {
    float sq = __fmul_rn(x, x);
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) sq = __fadd_rn(sq, __shfl_xor_sync(0xffffffffu, sq, m));
    return sq;
  };
#pragma unroll
  for (int j = 0; j < kRuns; ++j) {
    const int b = warp + j * warps;
    const float sq = run_sum(v[j]);
    if (lane == 0 && b < runs) run_ss[b] = sq;
  }
  for (int b = warp + kRuns * warps; b < runs; b += warps) {
    const int64_t i = static_cast<int64_t>(b) * 32 + lane;
    const float sq = run_sum(i < cols ? __ldcg(xr + i) : 0.0f);
    if (lane == 0) run_ss[b] = sq;
  }
  __syncthreads();
  float total = 0.0f;  // every thread, in run order
  for (int b = 0; b < runs; ++b) total = __fadd_rn(total, run_ss[b]);
  const float scale = rsqrtf(__fdiv_rn(total, static_cast<float>(cols)) + eps);
  auto out = [&](int64_t i, float x, float wi) {
    const float o = i < cols ? __fmul_rn(__fmul_rn(x, scale), wi) : 0.0f;
    if (i < cols) yr[i] = o;
    if (q != nullptr) QuantizeLane(o, q_at + i, q, d);  // cols is a multiple of 32 with a shadow
  };
#pragma unroll
  for (int j = 0; j < kRuns; ++j) {
    const int b = warp + j * warps;
    if (b < runs) out(static_cast<int64_t>(b) * 32 + lane, v[j], wv[j]);
  }
  for (int b = warp + kRuns * warps; b < runs; b += warps) {
    const int64_t i = static_cast<int64_t>(b) * 32 + lane;
    out(i, i < cols ? __ldcg(xr + i) : 0.0f, i < cols ? w[i] : 0.0f);
  }
}

// silu(g) * u.
__device__ __forceinline__ float SiluTimes(float g, float u) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}
struct SiluTimesOp {
  __device__ float operator()(float g, float u) const { return SiluTimes(g, u); }
};

// y = Op()(y, u) in place, a value a thread, for the element-wise ops whose output a quantized product
// reads (SiLU times up, the hybrid's attention gate): with q, y's int8 shadow in blocks of 32 (n is then
// a multiple of 32, so whole warps leave together).
template <class Op>
__global__ void PairKernel(float* y, const float* u, int64_t n, int8_t* q, float* d) {
  AfterPrevious();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = Op()(y[i], u[i]);
  y[i] = v;
  if (q != nullptr) QuantizeLane(v, i, q, d);
}

// The same with the shadow in groups of 256 values of a row (cols long): a block per group.
template <class Op>
__global__ void __launch_bounds__(kKQuantGroup)
    PairGroupsKernel(float* y, const float* u, int64_t cols, int8_t* q, float* d) {
  AfterPrevious();
  int64_t i = 0;
  const bool in = GroupElement(cols, &i);
  const float v = in ? Op()(y[i], u[i]) : 0.0f;
  if (in) y[i] = v;
  QuantizeGroupBlock(v, in, i, q, d);
}

// The rotation of the pair (x0, x1) by the angle whose cos and sin are c and s, rounded step by step
// (no contraction into fused multiply-adds, which the compiler may choose differently per kernel).
__device__ __forceinline__ float RotA(float x0, float x1, float c, float s) {
  return __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
}
__device__ __forceinline__ float RotB(float x0, float x1, float c, float s) {
  return __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

// Where row `row`'s keys and values go in the KV store: the start of its page.
template <typename T>
__device__ __forceinline__ T* KvPageBase(const DeviceKv& kv, const DeviceBatch& b, int64_t row,
                                         uint32_t* pos) {
  *pos = static_cast<uint32_t>(b.positions[row]);
  const auto pt = static_cast<uint32_t>(kv.page_tokens);
  const int32_t page = b.pages[b.page_begin[b.row_seq[row]] + *pos / pt];
  return static_cast<T*>(kv.page_ptr[page]);
}

// Where element i of head h of the row at position `pos` goes in its KV page: block (layer, keys (0) or
// values (1), head) of page_tokens rows of head_dim elements.
__device__ __forceinline__ int64_t KvElement(const DeviceKv& kv, int64_t layer, int which, int64_t h,
                                             uint32_t pos, int64_t i) {
  const int64_t block = kv.page_tokens * kv.head_dim;
  return ((layer * 2 + which) * kv.n_kv_head + h) * block +
         static_cast<int64_t>(pos % static_cast<uint32_t>(kv.page_tokens)) * kv.head_dim + i;
}

// Stores `value` as the cache's element type (f16 rounds to nearest).
template <typename T>
__device__ __forceinline__ void KvPut(T* base, int64_t at, float value) {
  if constexpr (sizeof(T) == 2) {
    base[at] = __float2half_rn(value);
  } else {
    base[at] = value;
  }
}

// Rope of row `row` of q (q_cols wide; null: none) and of k, then the KV store of k and v at the row's
// position (base and pos from KvPageBase), by one block. Each thread rotates whole pairs, so no element
// is read after another thread wrote it. Index arithmetic in 32 bits (a 64-bit division by a runtime
// value is a call of ~100 instructions).
template <typename T>
__device__ __forceinline__ void RopeKvWriteRow(int64_t row, float* q, int64_t q_cols, float* k,
                                               const float* v, int64_t head_dim, int64_t half,
                                               const float* cs, bool neox, const DeviceKv& kv, int64_t layer,
                                               T* base, uint32_t pos) {
  const int64_t nq = q != nullptr ? q_cols / head_dim : 0, width = kv.n_kv_head * head_dim;
  const auto uhalf = static_cast<uint32_t>(half), hd = static_cast<uint32_t>(head_dim);
  for (uint32_t t = threadIdx.x; t < nq * uhalf; t += blockDim.x) {
    const uint32_t h = t / uhalf, i = t % uhalf;
    float* x = q + row * q_cols + h * head_dim;
    const int64_t a = neox ? i : 2 * i, c = neox ? i + half : 2 * i + 1;
    const float x0 = __ldcg(x + a), x1 = __ldcg(x + c), cv = cs[i], sv = cs[half + i];
    x[a] = RotA(x0, x1, cv, sv);
    x[c] = RotB(x0, x1, cv, sv);
  }
  auto store = [&](int which, int64_t h, int64_t i, float value) {
    KvPut(base, KvElement(kv, layer, which, h, pos, i), value);
  };
  for (uint32_t t = threadIdx.x; t < kv.n_kv_head * uhalf; t += blockDim.x) {
    const uint32_t h = t / uhalf, i = t % uhalf;
    float* x = k + row * width + h * head_dim;
    const int64_t a = neox ? i : 2 * i, c = neox ? i + half : 2 * i + 1;
    const float x0 = __ldcg(x + a), x1 = __ldcg(x + c), cv = cs[i], sv = cs[half + i];
    const float ya = RotA(x0, x1, cv, sv), yc = RotB(x0, x1, cv, sv);
    x[a] = ya;
    x[c] = yc;
    store(0, h, a, ya);
    store(0, h, c, yc);
  }
  const uint32_t rest = hd - 2 * uhalf;  // dims past the rotary part
  for (uint32_t t = threadIdx.x; t < kv.n_kv_head * rest; t += blockDim.x) {
    const uint32_t h = t / rest, i = 2 * uhalf + t % rest;
    store(0, h, i, __ldcg(k + row * width + h * head_dim + i));
  }
  for (uint32_t t = threadIdx.x; t < width; t += blockDim.x) {
    store(1, t / hd, t % hd, __ldcg(v + row * width + t));
  }
}

}  // namespace fak::cuda
