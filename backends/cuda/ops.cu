// The CUDA backend's element-wise and row-wise kernels. Reductions (RMS, block maxima) run in a fixed
// tree order per row, so a row's result does not depend on the rows around it.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>

#include "backends/cuda/kernels.h"
#include "backends/cuda/kv_pages.cuh"  // ShadowScale, ShadowValue (also through row_ops.cuh)
#include "backends/cuda/pdl.cuh"
#include "backends/cuda/row_ops.cuh"

namespace fak::cuda {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(int64_t n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

__global__ void QuantizeKernel(const float* x, int64_t n, int8_t* q, float* d) {
  AfterPrevious();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;  // n is a multiple of 32: whole warps leave together
  QuantizeLane(x[i], i, q, d);
}

// Groups of 256 values of a row, a block per group.
__global__ void __launch_bounds__(kKQuantGroup)
    QuantizeGroupsKernel(const float* x, int64_t cols, int8_t* q, float* d) {
  AfterPrevious();
  int64_t i = 0;
  const bool in = GroupElement(cols, &i);
  QuantizeGroupBlock(in ? x[i] : 0.0f, in, i, q, d);
}

// One block per row, one warp per 32-element run (several runs per warp for long rows): the row is read
// once into registers, its sum of squares reduced in a fixed order (per thread, then per warp, then
// over warps in order), and written from the registers with its int8 shadow. The norm's weights are
// read before the wait for the previous kernel (no kernel writes them).
constexpr int kNormPerThread = 8;
__global__ void RmsNormKernel(const float* x, const float* w, float* y, int64_t cols, float eps, int8_t* q,
                              float* d, int group) {
  __shared__ __align__(16) float part[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t runs = (cols + 31) / 32;
  float v[kNormPerThread], wv[kNormPerThread];
#pragma unroll
  for (int k = 0; k < kNormPerThread; ++k) {
    const int64_t i = (warp + static_cast<int64_t>(k) * warps) * 32 + lane;
    wv[k] = i < cols ? w[i] : 0.0f;
  }
  AfterPrevious();
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kNormPerThread; ++k) {
    const int64_t i = (warp + static_cast<int64_t>(k) * warps) * 32 + lane;
    v[k] = i < cols ? xr[i] : 0.0f;
    ss = __fmaf_rn(v[k], v[k], ss);
  }
  for (int64_t b = warp + kNormPerThread * warps; b < runs; b += warps) {  // rows longer than the registers
    const int64_t i = b * 32 + lane;
    if (i < cols) ss = __fmaf_rn(xr[i], xr[i], ss);
  }
  ss = WarpSum(ss);
  if (lane == 0) part[warp] = ss;
  if (warp == 0 && lane >= warps) part[lane] = 0.0f;  // adding these +0 after the sums changes nothing
  __syncthreads();
  // The warps' sums in warp order, read four at a time (32 reads one after another were a chain of
  // shared-memory latencies).
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < 32; k += 4) {
    const float4 p4 = *reinterpret_cast<const float4*>(&part[k]);
    total = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(total, p4.x), p4.y), p4.z), p4.w);
  }
  const float scale = rsqrtf(total / static_cast<float>(cols) + eps);
  for (int64_t b = warp, k = 0; b < runs; b += warps, ++k) {
    const int64_t i = b * 32 + lane;
    float xv = 0.0f, wi = 0.0f;
#pragma unroll
    for (int j = 0; j < kNormPerThread; ++j) {
      if (j == k) xv = v[j], wi = wv[j];
    }
    if (k >= kNormPerThread && i < cols) xv = xr[i], wi = w[i];
    const float o = i < cols ? xv * scale * wi : 0.0f;
    if (i < cols) yr[i] = o;
    if (q != nullptr && group == 32) QuantizeLane(o, row * cols + i, q, d);
  }
  // Groups of 256 (rows longer than RmsNormGroupsKernel takes) span several warps' runs: from y, after a
  // barrier.
  if (q != nullptr && group != 32) {
    __syncthreads();
    QuantizeRowGroups(yr, cols, q, d, row * cols, warp, warps);
  }
}

// The norm of a model whose activations are quantized in groups of 256 (kernels.h Q8Act): warp w holds
// runs 8w .. 8w + 7 of the row (a 256-value group; cols up to 32 x 256) in registers, so after the one
// barrier of the sum of squares each warp quantizes its own group without another. Its order: each
// thread's 8 squares in run order, the warp's lanes by a butterfly (GroupSquares), the warps in order
// (GroupsScale). The same for every row and batch (a function of cols), with or without a shadow.
constexpr int kNormGroupRuns = kKQuantGroup / 32;
__device__ __forceinline__ float GroupSquares(const float (&v)[kNormGroupRuns]) {
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kNormGroupRuns; ++k) ss = __fmaf_rn(v[k], v[k], ss);
  return WarpSum(ss);
}
// 1 / rms from the groups' sums part[0..31] (+0 past the row's last group), added in order.
__device__ __forceinline__ float GroupsScale(const float* part, int64_t cols, float eps) {
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < 32; k += 4) {
    const float4 p4 = *reinterpret_cast<const float4*>(&part[k]);
    total = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(total, p4.x), p4.y), p4.z), p4.w);
  }
  return rsqrtf(__fadd_rn(__fdiv_rn(total, static_cast<float>(cols)), eps));
}
__device__ __forceinline__ float NormOut(float v, float scale, float w) {
  return __fmul_rn(__fmul_rn(v, scale), w);
}

__global__ void RmsNormGroupsKernel(const float* x, const float* w, float* y, int64_t cols, float eps,
                                    int8_t* q, float* d) {
  __shared__ __align__(16) float part[32];
  const int64_t row = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t i0 = static_cast<int64_t>(warp) * kKQuantGroup + lane;
  float v[kNormGroupRuns], wv[kNormGroupRuns];
#pragma unroll
  for (int k = 0; k < kNormGroupRuns; ++k) wv[k] = i0 + 32 * k < cols ? w[i0 + 32 * k] : 0.0f;
  AfterPrevious();
  const float* xr = x + row * cols;
#pragma unroll
  for (int k = 0; k < kNormGroupRuns; ++k) v[k] = i0 + 32 * k < cols ? xr[i0 + 32 * k] : 0.0f;
  const float ss = GroupSquares(v);
  if (lane == 0) part[warp] = ss;
  if (warp == 0 && lane >= warps) part[lane] = 0.0f;  // adding these +0 after the sums changes nothing
  __syncthreads();
  const float scale = GroupsScale(part, cols, eps);
  float* yr = y + row * cols;
  float o[kNormGroupRuns], amax = 0.0f;
#pragma unroll
  for (int k = 0; k < kNormGroupRuns; ++k) {
    const int64_t i = i0 + 32 * k;
    o[k] = i < cols ? NormOut(v[k], scale, wv[k]) : 0.0f;
    if (i < cols) yr[i] = o[k];
    amax = fmaxf(amax, fabsf(o[k]));
  }
  if (q == nullptr) return;
  // The group's maximum is exact in any order: QuantizeGroupWarp's scale and values.
  const float dv = ShadowScale(WarpMax(amax));
  const int64_t at = row * cols;
#pragma unroll
  for (int k = 0; k < kNormGroupRuns; ++k) {
    const int64_t i = i0 + 32 * k;
    if (i < cols) q[at + i] = ShadowValue(o[k], dv);
  }
  const int64_t runs = (cols + 31) / 32;
  if (lane < kNormGroupRuns && warp * kNormGroupRuns + lane < runs)
    d[at / 32 + warp * kNormGroupRuns + lane] = dv;
}

// The same norm for a few rows (a decode step's), a block per group of a row instead of a block per
// row, so it runs on as many multiprocessors as the row has groups: every block sums the whole row's
// squares in RmsNormGroupsKernel's order (its warps take the groups in turn), then writes and quantizes
// its own group (QuantizeGroupBlock: the same maximum, scale and values). The same bits.
__global__ void __launch_bounds__(kKQuantGroup)
    RmsNormGroupsSpreadKernel(const float* x, const float* w, float* y, int64_t cols, float eps, int8_t* q,
                              float* d) {
  __shared__ __align__(16) float part[32];
  const int64_t per_row = (cols + kKQuantGroup - 1) / kKQuantGroup;
  const int64_t row = blockIdx.x / per_row, i = blockIdx.x % per_row * kKQuantGroup + threadIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float wi = i < cols ? w[i] : 0.0f;
  AfterPrevious();
  const float* xr = x + row * cols;
  if (threadIdx.x < 32) part[threadIdx.x] = 0.0f;
  __syncthreads();
  for (int64_t g = warp; g < per_row; g += kKQuantGroup / 32) {
    float v[kNormGroupRuns];
#pragma unroll
    for (int k = 0; k < kNormGroupRuns; ++k) {
      const int64_t e = g * kKQuantGroup + 32 * k + lane;
      v[k] = e < cols ? xr[e] : 0.0f;
    }
    const float ss = GroupSquares(v);
    if (lane == 0) part[g] = ss;
  }
  __syncthreads();
  const float scale = GroupsScale(part, cols, eps);
  const bool in = i < cols;
  const float o = in ? NormOut(xr[i], scale, wi) : 0.0f;
  if (in) y[row * cols + i] = o;
  if (q != nullptr) QuantizeGroupBlock(o, in, row * cols + i, q, d);  // q is the same for the whole block
}

// The same norm in the order of RmsNormRow (row_ops.cuh), which the one-row products' norm tail shares:
// used for every row while that tail is on (FAK_CUDA_TAILS with norm), so a row's bits do not depend
// on whether its norm ran in a tail. Two runs per warp where that fits, at most 32 warps.
constexpr int kNormRuns = 6;
__global__ void __launch_bounds__(1024) RmsNormRunsKernel(const float* x, const float* w, float* y,
                                                          int64_t cols, float eps, int8_t* q, float* d) {
  const int64_t row = blockIdx.x;
  AfterPrevious();
  RmsNormRow<kNormRuns>(x + row * cols, w, y + row * cols, cols, eps, q, d, row * cols);
}

__global__ void AddRowKernel(float* x, const float* b, int64_t n, int64_t cols) {
  AfterPrevious();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += b[i % cols];
}

__global__ void AddKernel(float* x, const float* y, int64_t n) {
  AfterPrevious();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

// One block per row; threads over (head, pair).
__global__ void RopeKernel(float* x, int64_t cols, int64_t head_dim, int64_t half, const float* cos_sin,
                           bool neox) {
  AfterPrevious();
  const int64_t row = blockIdx.x;
  const auto heads = static_cast<uint32_t>(cols / head_dim), uhalf = static_cast<uint32_t>(half);
  const float* cs = cos_sin + row * 2 * half;
  for (uint32_t t = threadIdx.x; t < heads * uhalf; t += blockDim.x) {
    const uint32_t h = t / uhalf, i = t % uhalf;  // 32-bit: a 64-bit division is a long call
    float* v = x + row * cols + h * head_dim;
    const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    const float c = cs[i], s = cs[half + i];
    const float x0 = v[a], x1 = v[b];
    v[a] = RotA(x0, x1, c, s);
    v[b] = RotB(x0, x1, c, s);
  }
}

__global__ void GatherKernel(const float* x, int64_t cols, const int32_t* out_rows, float* out) {
  AfterPrevious();
  const int64_t r = blockIdx.x;
  const float* src = x + static_cast<int64_t>(out_rows[r]) * cols;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) out[r * cols + i] = src[i];
}

// One block per row; threads over (kv head, dim).
template <typename T>
__global__ void KvWriteKernel(DeviceKv kv, DeviceBatch b, int64_t layer, const float* k, const float* v) {
  AfterPrevious();
  const int64_t row = blockIdx.x;
  const int64_t width = kv.n_kv_head * kv.head_dim;
  uint32_t pos = 0;
  T* base = KvPageBase<T>(kv, b, row, &pos);
  const auto hd = static_cast<uint32_t>(kv.head_dim);
  for (uint32_t t = threadIdx.x; t < width; t += blockDim.x) {
    const uint32_t h = t / hd, i = t % hd;
    KvPut(base, KvElement(kv, layer, 0, h, pos, i), k[row * width + t]);
    KvPut(base, KvElement(kv, layer, 1, h, pos, i), v[row * width + t]);
  }
}

// Rope of q and k and the KV store of k and v in one launch (one block per row, RopeKvWriteRow): the
// same float operations as RopeKernel followed by KvWriteKernel.
template <typename T>
__global__ void RopeKvWriteKernel(float* q, int64_t q_cols, float* k, const float* v, int64_t head_dim,
                                  int64_t half, const float* cos_sin, bool neox, DeviceKv kv, DeviceBatch b,
                                  int64_t layer) {
  const int64_t row = blockIdx.x;
  const float* cs = cos_sin + row * 2 * half;
  // Before the wait: where the row's keys and values go, from the batch arrays and the page table,
  // which the step uploads before its kernels and no kernel writes; and the row's cos and sin.
  uint32_t pos = 0;
  T* base = KvPageBase<T>(kv, b, row, &pos);
  if (threadIdx.x < 2 * half) PrefetchL1(cs + threadIdx.x);
  AfterPrevious();
  RopeKvWriteRow<T>(row, q, q_cols, k, v, head_dim, half, cs, neox, kv, layer, base, pos);
}

// Block b reads the 16-byte chunks b * blockDim + t, then every gridDim * blockDim-th after (the first
// chunk is at x aligned down, the ends masked), and writes whether any value had all exponent bits set.
__global__ void NonFiniteFlagsKernel(const float* x, int64_t n, uint32_t* flags) {
  __shared__ uint32_t warp_any[kThreads / 32];
  AfterPrevious();
  const auto addr = reinterpret_cast<uintptr_t>(x);
  const auto* base = reinterpret_cast<const uint4*>(addr & ~uintptr_t{15});
  const int64_t lead = static_cast<int64_t>(addr & 15) / 4;  // floats before x in the first chunk
  const int64_t chunks = (lead + n + 3) / 4;
  uint32_t bad = 0;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldg(base + c);
    const uint32_t e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t i = 4 * c + k - lead;
      bad |= static_cast<uint32_t>(i >= 0 && i < n && (e[k] & 0x7f800000u) == 0x7f800000u);
    }
  }
  const uint32_t any = __any_sync(0xffffffffu, bad != 0);
  if ((threadIdx.x & 31) == 0) warp_any[threadIdx.x >> 5] = any;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t all = 0;
    for (int w = 0; w < kThreads / 32; ++w) all |= warp_any[w];
    flags[blockIdx.x] = all;
  }
}

}  // namespace

namespace {
thread_local bool plain_launches = false;
}  // namespace

void SetPlainLaunches(bool plain) { plain_launches = plain; }
bool PlainLaunches() { return plain_launches; }

cudaError_t NonFiniteFlags(const float* x, int64_t n, uint32_t* flags, cudaStream_t stream) {
  return Launch(NonFiniteFlagsKernel, kFiniteFlags, kThreads, 0, stream, x, n, flags);
}

cudaError_t Quantize(const float* x, int64_t rows, int64_t cols, int8_t* q, float* d, int group,
                     cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  if (cols % 32 != 0 || (group != 32 && group != kKQuantGroup)) return cudaErrorInvalidValue;
  if (group == 32) return Launch(QuantizeKernel, Blocks(n, kThreads), kThreads, 0, stream, x, n, q, d);
  const int64_t groups = rows * ((cols + kKQuantGroup - 1) / kKQuantGroup);
  return Launch(QuantizeGroupsKernel, static_cast<unsigned>(groups), kKQuantGroup, 0, stream, x, cols, q, d);
}

// Rows up to which the norm in groups of 256 takes a block per group rather than per row (the same
// bits): a decode step's rows, which would otherwise leave all but a few multiprocessors idle. Off by
// default until measured on a GPU (FAK_CUDA_NORM_SPREAD=1 turns it on; read at every launch, so tests can
// switch it): the gated norm's move from 2 to 8 blocks at the 2B geometry went with 4-9% faster decode
// (docs/bench/gpu.md, calls 25 and 26), and this norm runs twice a layer on one block.
constexpr int64_t kNormSpreadRows = 16;
bool NormSpread() {
  const char* v = std::getenv("FAK_CUDA_NORM_SPREAD");
  return v != nullptr && v[0] == '1';
}

cudaError_t RmsNorm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps,
                    int8_t* q, float* d, int group, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (q != nullptr && (cols % 32 != 0 || (group != 32 && group != kKQuantGroup)))
    return cudaErrorInvalidValue;
  // A warp per 32-element run, two runs per warp where that fits (d_model 1536: 24 warps), at most
  // 32 warps: a function of cols only.
  const int64_t runs = (cols + 31) / 32;
  const int warps = static_cast<int>(std::min<int64_t>(32, std::max<int64_t>(1, (runs + 1) / 2)));
  if (TailInKernel(TailKind::kRmsNorm)) {
    if (runs > kNormMaxRuns) return cudaErrorInvalidValue;
    // The tail's order quantizes per 32; groups of 256 are made from y after.
    const bool own = group == 32;
    if (const cudaError_t e = Launch(RmsNormRunsKernel, static_cast<unsigned>(rows), warps * 32, 0, stream, x,
                                     w, y, cols, eps, own ? q : nullptr, own ? d : nullptr);
        e != cudaSuccess || own || q == nullptr) {
      return e;
    }
    return Quantize(y, rows, cols, q, d, group, stream);
  }
  if (group == kKQuantGroup && runs <= 32 * kNormGroupRuns && rows <= kNormSpreadRows && NormSpread()) {
    const int64_t blocks = rows * ((cols + kKQuantGroup - 1) / kKQuantGroup);
    return Launch(RmsNormGroupsSpreadKernel, static_cast<unsigned>(blocks), kKQuantGroup, 0, stream, x, w, y,
                  cols, eps, q, d);
  }
  if (group == kKQuantGroup && runs <= 32 * kNormGroupRuns) {  // a warp per group, the model's order
    const auto group_warps = static_cast<int>((runs + kNormGroupRuns - 1) / kNormGroupRuns);
    return Launch(RmsNormGroupsKernel, static_cast<unsigned>(rows), group_warps * 32, 0, stream, x, w, y,
                  cols, eps, q, d);
  }
  return Launch(RmsNormKernel, static_cast<unsigned>(rows), warps * 32, 0, stream, x, w, y, cols, eps, q, d,
                group);
}

cudaError_t AddRow(float* x, const float* b, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  return Launch(AddRowKernel, Blocks(n, kThreads), kThreads, 0, stream, x, b, n, cols);
}

cudaError_t Add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return Launch(AddKernel, Blocks(n, kThreads), kThreads, 0, stream, x, y, n);
}

cudaError_t SiluMul(float* g, const float* u, int64_t rows, int64_t cols, int8_t* q, float* d, int group,
                    cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  if (q != nullptr && (cols % 32 != 0 || (group != 32 && group != kKQuantGroup)))
    return cudaErrorInvalidValue;
  if (q == nullptr || group == 32)
    return Launch(PairKernel<SiluTimesOp>, Blocks(n, kThreads), kThreads, 0, stream, g, u, n, q, d);
  const int64_t groups = rows * ((cols + kKQuantGroup - 1) / kKQuantGroup);
  return Launch(PairGroupsKernel<SiluTimesOp>, static_cast<unsigned>(groups), kKQuantGroup, 0, stream, g, u,
                cols, q, d);
}

cudaError_t Rope(float* x, int64_t rows, int64_t cols, int64_t head_dim, int64_t half, const float* cos_sin,
                 bool neox, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  return Launch(RopeKernel, static_cast<unsigned>(rows), 128, 0, stream, x, cols, head_dim, half, cos_sin,
                neox);
}

cudaError_t Gather(const float* x, int64_t cols, const int32_t* out_rows, int64_t n_out, float* out,
                   cudaStream_t stream) {
  if (n_out <= 0) return cudaSuccess;
  return Launch(GatherKernel, static_cast<unsigned>(n_out), kThreads, 0, stream, x, cols, out_rows, out);
}

cudaError_t KvWrite(const DeviceKv& kv, const DeviceBatch& b, int64_t layer, const float* k, const float* v,
                    int64_t rows, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  const auto grid = static_cast<unsigned>(rows);
  if (kv.f32) return Launch(KvWriteKernel<float>, grid, kThreads, 0, stream, kv, b, layer, k, v);
  return Launch(KvWriteKernel<__half>, grid, kThreads, 0, stream, kv, b, layer, k, v);
}

cudaError_t RopeKvWrite(float* q, int64_t q_cols, float* k, const float* v, int64_t rows, int64_t head_dim,
                        int64_t half, const float* cos_sin, bool neox, const DeviceKv& kv,
                        const DeviceBatch& b, int64_t layer, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  const auto grid = static_cast<unsigned>(rows);
  if (kv.f32) {
    return Launch(RopeKvWriteKernel<float>, grid, kThreads, 0, stream, q, q_cols, k, v, head_dim, half,
                  cos_sin, neox, kv, b, layer);
  }
  return Launch(RopeKvWriteKernel<__half>, grid, kThreads, 0, stream, q, q_cols, k, v, head_dim, half,
                cos_sin, neox, kv, b, layer);
}

}  // namespace fak::cuda
