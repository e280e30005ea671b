// The hybrid architecture's kernels: the Gated-DeltaNet convolution and recurrence, the gated RMSNorm,
// the attention output gate and the query/gate split. Every sequence's rows run in order inside one
// thread (convolution) or one block (recurrence), so a row's result does not depend on the batch.
#include "backends/cuda/kernels.h"
#include "backends/cuda/pdl.cuh"

namespace fak::cuda {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(int64_t n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

__device__ __forceinline__ float Silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float Softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// The sum of v over the block (blockDim.x a multiple of 32, at most 1024), in a fixed tree order.
__device__ float BlockSum(float v, float* red) {
  v = WarpSum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // red may still be read from the previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = lane < warps ? red[lane] : 0.0f;
  return WarpSum(s);
}

__global__ void SigmoidMulKernel(float* x, const float* g, int64_t n) {
  AfterPrevious();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 1.0f / (1.0f + expf(-g[i]));
}

__global__ void SplitHeadsKernel(const float* x, int64_t heads, int64_t hd, float* a, float* b) {
  AfterPrevious();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= heads * hd) return;
  const int64_t h = i / hd, e = i % hd;
  a[i] = x[2 * h * hd + e];
  b[i] = x[(2 * h + 1) * hd + e];
}

// One warp per row.
__global__ void GatedRmsNormKernel(float* x, const float* w, const float* z, int64_t rows, int64_t cols,
                                   float eps) {
  AfterPrevious();
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  float* xr = x + r * cols;
  const float* zr = z + r * cols;
  float ss = 0.0f;
  for (int64_t i = lane; i < cols; i += 32) ss += xr[i] * xr[i];
  ss = WarpSum(ss);
  const float inv = rsqrtf(ss / static_cast<float>(cols) + eps);
  for (int64_t i = lane; i < cols; i += 32) xr[i] = w[i] * (xr[i] * inv) * Silu(zr[i]);
}

// One thread per (sequence, channel): the sequence's rows in order, the window in its state slot.
__global__ void DeltaNetConvKernel(float* x, const float* w, const DeltaNetDevice d, const int32_t* seqs) {
  AfterPrevious();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= d.conv_dim) return;
  const int32_t* s = seqs + 3 * blockIdx.y;
  const int64_t row0 = s[0], n = s[1];
  float* window =
      reinterpret_cast<float*>(d.states + static_cast<size_t>(s[2]) * d.slot_bytes + d.conv_offset);
  const int hist = d.conv_kernel - 1;
  float win[15];
  for (int j = 0; j < hist; ++j) win[j] = window[j * d.conv_dim + c];
  const float* wc = w + c * d.conv_kernel;
  for (int64_t t = 0; t < n; ++t) {
    float* p = x + (row0 + t) * d.conv_dim + c;
    const float in = *p;
    float acc = 0.0f;
    for (int j = 0; j < hist; ++j) acc += wc[j] * win[j];
    acc += wc[hist] * in;
    for (int j = 0; j + 1 < hist; ++j) win[j] = win[j + 1];
    if (hist > 0) win[hist - 1] = in;
    *p = Silu(acc);
  }
  for (int j = 0; j < hist; ++j) window[j * d.conv_dim + c] = win[j];
}

// One block per (sequence, value head). The head's state S (k_dim x v_dim, row-major in the slot) is
// held in registers for the whole run of the sequence's rows: each value column j is split over
// kSplit threads of one warp, each owning k_dim / kSplit rows of it, and their partial sums meet by
// shuffles in a fixed order. S is read once before the first row and written once after the last.
constexpr int kSplit = 4;
constexpr int kMaxRows = 32;  // rows of S per thread: k_dim up to kSplit * kMaxRows = 128

__global__ void __launch_bounds__(kSplit * 128)
    DeltaNetRuleKernel(const float* x, const float* b, const float* a, const float* ssm_a,
                       const float* dt_bias, const DeltaNetDevice d, const int32_t* seqs, float* out) {
  AfterPrevious();
  extern __shared__ float sh[];
  float* q = sh;
  float* k = q + d.k_dim;
  float* red = k + d.k_dim;
  const int64_t nv = d.n_v_head, dk = d.k_dim, dv = d.v_dim;
  const int64_t seq = blockIdx.x / nv, h = blockIdx.x % nv, kh = h % d.n_k_head;
  const int32_t* s = seqs + 3 * seq;
  const int64_t row0 = s[0], n = s[1];
  float* S = reinterpret_cast<float*>(d.states + static_cast<size_t>(s[2]) * d.slot_bytes + d.rule_offset) +
             h * dk * dv;
  // Thread t: column j = t / kSplit, slice p = t % kSplit owning rows i = p + kSplit * u.
  const int t = threadIdx.x;
  const int64_t j = t / kSplit;
  const int p = t % kSplit;
  const bool col = j < dv;
  float reg[kMaxRows];
#pragma unroll
  for (int u = 0; u < kMaxRows; ++u) {
    const int64_t i = p + static_cast<int64_t>(kSplit) * u;
    reg[u] = col && i < dk ? S[i * dv + j] : 0.0f;
  }
  const float q_scale = rsqrtf(static_cast<float>(dk));
  for (int64_t r = 0; r < n; ++r) {
    const float* row = x + (row0 + r) * d.conv_dim;
    float qq = 0.0f, kk = 0.0f;
    for (int64_t i = t; i < dk; i += blockDim.x) {
      const float qi = row[kh * dk + i], ki = row[d.n_k_head * dk + kh * dk + i];
      q[i] = qi;
      k[i] = ki;
      qq += qi * qi;
      kk += ki * ki;
    }
    const float q_inv = rsqrtf(BlockSum(qq, red) + d.eps) * q_scale;
    const float k_inv = rsqrtf(BlockSum(kk, red) + d.eps);
    for (int64_t i = t; i < dk; i += blockDim.x) {
      q[i] *= q_inv;
      k[i] *= k_inv;
    }
    __syncthreads();
    const float beta = 1.0f / (1.0f + expf(-b[(row0 + r) * nv + h]));
    const float decay = expf(ssm_a[h] * Softplus(a[(row0 + r) * nv + h] + dt_bias[h]));
    // S *= decay; mem = k^T S (this thread's rows, then the column's kSplit partial sums).
    float mem = 0.0f;
#pragma unroll
    for (int u = 0; u < kMaxRows; ++u) {
      const int64_t i = p + static_cast<int64_t>(kSplit) * u;
      if (i < dk) {
        reg[u] *= decay;
        mem += reg[u] * k[i];
      }
    }
#pragma unroll
    for (int m = 1; m < kSplit; m <<= 1) mem += __shfl_xor_sync(0xffffffffu, mem, m);
    const float delta = col ? (row[2 * d.n_k_head * dk + h * dv + j] - mem) * beta : 0.0f;
    // S += k delta^T; o = q^T S.
    float o = 0.0f;
#pragma unroll
    for (int u = 0; u < kMaxRows; ++u) {
      const int64_t i = p + static_cast<int64_t>(kSplit) * u;
      if (i < dk) {
        reg[u] += k[i] * delta;
        o += reg[u] * q[i];
      }
    }
#pragma unroll
    for (int m = 1; m < kSplit; m <<= 1) o += __shfl_xor_sync(0xffffffffu, o, m);
    if (col && p == 0) out[(row0 + r) * nv * dv + h * dv + j] = o;
    __syncthreads();  // q and k are rewritten for the next row
  }
#pragma unroll
  for (int u = 0; u < kMaxRows; ++u) {
    const int64_t i = p + static_cast<int64_t>(kSplit) * u;
    if (col && i < dk) S[i * dv + j] = reg[u];
  }
}

}  // namespace

cudaError_t SigmoidMul(float* x, const float* g, int64_t n, cudaStream_t stream) {
  return Launch(SigmoidMulKernel, Blocks(n, kThreads), kThreads, 0, stream, x, g, n);
}

cudaError_t SplitHeads(const float* x, int64_t heads, int64_t head_dim, float* a, float* b,
                       cudaStream_t stream) {
  return Launch(SplitHeadsKernel, Blocks(heads * head_dim, kThreads), kThreads, 0, stream, x, heads, head_dim,
                a, b);
}

cudaError_t GatedRmsNorm(float* x, const float* w, const float* z, int64_t rows, int64_t cols, float eps,
                         cudaStream_t stream) {
  return Launch(GatedRmsNormKernel, Blocks(rows, kThreads / 32), kThreads, 0, stream, x, w, z, rows, cols,
                eps);
}

cudaError_t DeltaNetConv(float* x, const float* w, const DeltaNetDevice& d, const int32_t* seqs,
                         int64_t n_seqs, cudaStream_t stream) {
  if (n_seqs == 0) return cudaSuccess;
  const dim3 grid(Blocks(d.conv_dim, 128), static_cast<unsigned>(n_seqs));
  return Launch(DeltaNetConvKernel, grid, 128, 0, stream, x, w, d, seqs);
}

cudaError_t DeltaNetRule(const float* x, const float* b, const float* a, const float* ssm_a,
                         const float* dt_bias, const DeltaNetDevice& d, const int32_t* seqs, int64_t n_seqs,
                         float* out, cudaStream_t stream) {
  if (n_seqs == 0) return cudaSuccess;
  if (d.k_dim > kSplit * kMaxRows || d.v_dim > 128) return cudaErrorInvalidValue;  // the launch bounds
  const int threads = static_cast<int>((d.v_dim * kSplit + 31) / 32 * 32);
  const size_t smem = static_cast<size_t>(2 * d.k_dim + 32) * 4;
  return Launch(DeltaNetRuleKernel, static_cast<unsigned>(n_seqs * d.n_v_head), threads, smem, stream, x, b,
                a, ssm_a, dt_bias, d, seqs, out);
}

}  // namespace fak::cuda
