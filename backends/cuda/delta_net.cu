// The hybrid architecture's kernels: the Gated-DeltaNet convolution and recurrence, the gated RMSNorm,
// the attention output gate and the query/gate split. Every sequence's rows run in order inside one
// thread (convolution) or one warp (each column of the recurrence), so a row's result does not depend
// on the batch. The gated norm and the output gate write the int8 shadow of their output with it (the
// next op is a quantized product), by the same functions as the quantize kernel, so the shadow's bits
// are those a separate quantize launch would give.
#include <cstdlib>

#include "backends/cuda/async_copy.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/pdl.cuh"
#include "backends/cuda/row_ops.cuh"  // WarpSum, QuantizeLane, PairKernel, PairGroupsKernel

namespace fak::cuda {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(int64_t n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

__device__ __forceinline__ float Silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float Softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Every step rounded on its own (no contraction), so each kernel that applies the gate computes it alike.
__device__ __forceinline__ float SigmoidTimes(float x, float g) {
  return __fmul_rn(x, __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-g))));
}

struct SigmoidTimesOp {
  __device__ float operator()(float x, float g) const { return SigmoidTimes(x, g); }
};

__global__ void SplitHeadsKernel(const float* x, int64_t heads, int64_t hd, float* a, float* b) {
  AfterPrevious();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= heads * hd) return;
  const int64_t h = i / hd, e = i % hd;
  a[i] = x[2 * h * hd + e];
  b[i] = x[(2 * h + 1) * hd + e];
}

// One row (a head) of the gated norm by one warp, in place: lane l sums the squares of elements l, l + 32,
// ... in order, the lanes by a butterfly; then each element's value, also handed to out(i, value).
template <class Out>
__device__ __forceinline__ void GatedNormRow(float* xr, const float* w, const float* zr, int64_t cols,
                                             float eps, Out&& out) {
  const int lane = threadIdx.x % 32;
  float ss = 0.0f;
  for (int64_t i = lane; i < cols; i += 32) ss = __fmaf_rn(xr[i], xr[i], ss);
  ss = WarpSum(ss);
  const float inv = rsqrtf(__fadd_rn(__fdiv_rn(ss, static_cast<float>(cols)), eps));
  for (int64_t i = lane; i < cols; i += 32) {
    const float v = __fmul_rn(__fmul_rn(w[i], __fmul_rn(xr[i], inv)), Silu(zr[i]));
    xr[i] = v;
    out(i, v);
  }
}

// One warp per row; with q, the shadow in blocks of 32 (cols a multiple of 32).
__global__ void GatedRmsNormKernel(float* x, const float* w, const float* z, int64_t rows, int64_t cols,
                                   float eps, int8_t* q, float* d) {
  AfterPrevious();
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;
  GatedNormRow(x + r * cols, w, z + r * cols, cols, eps, [&](int64_t i, float v) {
    if (q != nullptr) QuantizeLane(v, r * cols + i, q, d);
  });
}

// The shadow in groups of 256 consecutive values of the whole tensor (a row of the next product is a
// whole number of them: the caller checks), for rows of cols dividing 256: a block per group, its
// 256 / cols rows normalized by its first warps, then a value a thread quantized.
__global__ void __launch_bounds__(kKQuantGroup)
    GatedRmsNormGroupsKernel(float* x, const float* w, const float* z, int64_t rows, int64_t cols, float eps,
                             int8_t* q, float* d) {
  AfterPrevious();
  __shared__ float y[kKQuantGroup];
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int64_t per_group = kKQuantGroup / cols, r = static_cast<int64_t>(blockIdx.x) * per_group + warp;
  if (warp < per_group && r < rows) {
    GatedNormRow(x + r * cols, w, z + r * cols, cols, eps,
                 [&](int64_t i, float v) { y[warp * cols + i] = v; });
  }
  __syncthreads();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kKQuantGroup + threadIdx.x;
  const bool in = i < rows * cols;
  QuantizeGroupBlock(in ? y[threadIdx.x] : 0.0f, in, i, q, d);
}

// One thread per (sequence, channel): the sequence's rows in order, the window in its state slot. The
// rows' inputs are loaded kConvRows at a time so their loads overlap (each thread owns its channel, so
// reading ahead before writing is safe in place).
constexpr int kConvRows = 32;

// kHist: the window's length (conv_kernel - 1) fixed at compile time, so the window lives in registers;
// 0 reads it from d (the window then sits in local memory).
template <int kHist>
__global__ void DeltaNetConvKernel(float* x, const float* w, const DeltaNetDevice d, const int32_t* seqs) {
  AfterPrevious();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= d.conv_dim) return;
  const int32_t* s = seqs + 3 * blockIdx.y;
  const int64_t row0 = s[0], n = s[1];
  float* window =
      reinterpret_cast<float*>(d.states + static_cast<size_t>(s[2]) * d.slot_bytes + d.conv_offset);
  const int hist = kHist > 0 ? kHist : d.conv_kernel - 1;
  constexpr int kWin = kHist > 0 ? kHist : 15;
  float win[kWin];
#pragma unroll
  for (int j = 0; j < kWin; ++j) win[j] = j < hist ? window[j * d.conv_dim + c] : 0.0f;
  const float* wc = w + c * d.conv_kernel;
  float* xc = x + row0 * d.conv_dim + c;
  for (int64_t t0 = 0; t0 < n; t0 += kConvRows) {
    float in[kConvRows];
#pragma unroll
    for (int u = 0; u < kConvRows; ++u) in[u] = t0 + u < n ? xc[(t0 + u) * d.conv_dim] : 0.0f;
#pragma unroll
    for (int u = 0; u < kConvRows; ++u) {
      if (t0 + u >= n) break;
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < kWin; ++j) {
        if (j < hist) acc += wc[j] * win[j];
      }
      acc += wc[hist] * in[u];
#pragma unroll
      for (int j = 0; j + 1 < kWin; ++j) {
        if (j + 1 < hist) win[j] = win[j + 1];
      }
      if (hist > 0) win[hist - 1] = in[u];
      xc[(t0 + u) * d.conv_dim] = Silu(acc);
    }
  }
#pragma unroll
  for (int j = 0; j < kWin; ++j) {
    if (j < hist) window[j * d.conv_dim + c] = win[j];
  }
}

// The same convolution with a sequence's rows spread over a block: 32 channels (the lanes) x kConvChunks
// runs of kConvRun consecutive rows (the warps), kConvChunks * kConvRun rows a pass. A thread loads its
// run's inputs, publishes its last three, and after the barrier takes the three before its run from the
// warp before it (warp 0: from the previous pass's last warp, or the state's window) and computes its
// run exactly as DeltaNetConvKernel<3> does row by row (the same window, the same sums in the same
// order), so the bits do not depend on which kernel ran. In place: every input of a pass is read before
// the barrier, every output written after it. For prompts: one thread per channel walking 512 rows in
// order leaves most of the GPU idle (conv_dim threads in all).
constexpr int kConvRun = 8, kConvChunks = 16, kConvHist = 3;

__global__ void __launch_bounds__(32 * kConvChunks)
    DeltaNetConvRowsKernel(float* x, const float* w, const DeltaNetDevice d, const int32_t* seqs) {
  AfterPrevious();
  __shared__ float tail[kConvChunks][kConvHist][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + lane;
  const bool live = c < d.conv_dim;
  const int32_t* s = seqs + 3 * blockIdx.y;
  const int64_t row0 = s[0], n = s[1];
  float* window =
      reinterpret_cast<float*>(d.states + static_cast<size_t>(s[2]) * d.slot_bytes + d.conv_offset);
  float wc[kConvHist + 1] = {};
  float carry[kConvHist] = {};  // warp 0: the three inputs before this pass
  if (live) {
#pragma unroll
    for (int j = 0; j <= kConvHist; ++j) wc[j] = w[c * (kConvHist + 1) + j];
    if (warp == 0) {
#pragma unroll
      for (int j = 0; j < kConvHist; ++j) carry[j] = window[j * d.conv_dim + c];
    }
  }
  float* xc = x + row0 * d.conv_dim + c;
  constexpr int64_t kPass = static_cast<int64_t>(kConvRun) * kConvChunks;
  for (int64_t t0 = 0; t0 < n; t0 += kPass) {
    const int64_t first = t0 + static_cast<int64_t>(warp) * kConvRun;
    float in[kConvRun];
#pragma unroll
    for (int u = 0; u < kConvRun; ++u) in[u] = live && first + u < n ? xc[(first + u) * d.conv_dim] : 0.0f;
    __syncthreads();  // every thread is done with the previous pass's tails
#pragma unroll
    for (int j = 0; j < kConvHist; ++j) tail[warp][j][lane] = in[kConvRun - kConvHist + j];
    __syncthreads();
    float win[kConvHist];
#pragma unroll
    for (int j = 0; j < kConvHist; ++j) win[j] = warp > 0 ? tail[warp - 1][j][lane] : carry[j];
    if (warp == 0) {
#pragma unroll
      for (int j = 0; j < kConvHist; ++j) carry[j] = tail[kConvChunks - 1][j][lane];
    }
    if (!live || first >= n) continue;
#pragma unroll
    for (int u = 0; u < kConvRun; ++u) {
      if (first + u >= n) break;
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < kConvHist; ++j) acc += wc[j] * win[j];
      acc += wc[kConvHist] * in[u];
#pragma unroll
      for (int j = 0; j + 1 < kConvHist; ++j) win[j] = win[j + 1];
      win[kConvHist - 1] = in[u];
      xc[(first + u) * d.conv_dim] = Silu(acc);
    }
    if (first + kConvRun >= n) {  // this run holds the sequence's last row: the window it leaves
#pragma unroll
      for (int j = 0; j < kConvHist; ++j) window[j * d.conv_dim + c] = win[j];
    }
  }
}

// The gated delta rule. The columns of a head's state S (k_dim x v_dim, row-major in the slot) evolve
// independently (mem_j = k.S_j, delta_j = (v_j - mem_j) beta, S_j += k delta_j, o_j = q.S_j), so each
// block takes kScanCols columns of one (sequence, value head), and each column is split over kLanes
// lanes of a warp: lane slice p owns the rows of the float4 chunks kLanes u + p, held in registers for
// the sequence's whole run of rows; the partial sums meet by shuffles in a fixed order. A row is one
// dependent chain (the next row's k.S needs this row's update), so the kernel is bound by latency: eight
// lanes a column halve each lane's chain and double the warps in flight against four lanes (measured on
// an H100: docs/bench/gpu.md). The rows' inputs (q and k of the key head, b, a and the block's v) reach
// shared memory kStageRows rows at a time by asynchronous copies while the previous rows are computed;
// each stage is then prepared in place (q and k L2-normalized, kLanes threads per vector; beta and
// decay), so a row waits neither for memory nor for a reduction across the block. S is read once before
// the first row and written once after the last.
constexpr int kLanes = 8;
constexpr int kScanWarps = 4;
constexpr int kScanCols = 32 / kLanes * kScanWarps;
constexpr int kMaxKDim = 128;
constexpr int kChunks = kMaxKDim / (4 * kLanes);  // float4 chunks of S's rows per lane
constexpr int kStageRows = 8;

struct alignas(16) ScanStage {
  float qk[kStageRows][2 * kMaxKDim];  // q then (at kMaxKDim) k of the key head
  float gates[kStageRows][2];          // b then a; after Prepare, decay then beta
  float v[kStageRows][kScanCols];
};

// The stage's element indices fit 32 bits (a few thousand); only the rows' offsets in x need 64.
__device__ __forceinline__ void LoadStage(ScanStage& st, const float* x, const float* b, const float* a,
                                          const DeltaNetDevice& d, int64_t row0, int rows, int h, int col0) {
  const int dk = static_cast<int>(d.k_dim), nk = static_cast<int>(d.n_k_head),
            kh = d.key_group > 0 ? h / static_cast<int>(d.key_group) : h % nk, quads = dk / 4;
  const int nv = static_cast<int>(d.n_v_head), dv = static_cast<int>(d.v_dim);
  for (int i = threadIdx.x; i < kStageRows * 2 * quads; i += blockDim.x) {
    const int r = i / (2 * quads), w = i % (2 * quads);
    const bool is_k = w >= quads;
    const int e = 4 * (is_k ? w - quads : w);
    const bool valid = r < rows;
    const float* src = valid ? x + (row0 + r) * d.conv_dim + (is_k ? nk * dk : 0) + kh * dk + e : x;
    CopyAsync16(&st.qk[r][(is_k ? kMaxKDim : 0) + e], src, valid);
  }
  for (int i = threadIdx.x; i < kStageRows * (2 + kScanCols); i += blockDim.x) {
    const int r = i / (2 + kScanCols), w = i % (2 + kScanCols), col = col0 + w - 2;
    if (w < 2) {
      const bool valid = r < rows;
      CopyAsync4(&st.gates[r][w], valid ? (w == 0 ? b : a) + (row0 + r) * nv + h : b, valid);
    } else {
      const bool valid = r < rows && col < dv;
      CopyAsync4(&st.v[r][w - 2], valid ? x + (row0 + r) * d.conv_dim + 2 * nk * dk + h * dv + col : x,
                 valid);
    }
  }
  CopyCommit();
}

// The sum of a column's (or a stage vector's) kLanes partial sums, the same order in every lane.
__device__ __forceinline__ float ColumnSum(float v) {
#pragma unroll
  for (int m = 1; m < kLanes; m <<= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// q /= |q| (times 1/sqrt(k_dim)) and k /= |k| for the stage's rows, kLanes lanes per vector (lane p the
// float4s kLanes u + p of its kMaxKDim values, zeros past k_dim: a group's loads fall in distinct
// banks), so the stage's 2 kStageRows vectors are normalized at once by the block's threads; gates
// (b, a) -> (decay, beta). A vector's sum of squares: each lane's values in four running sums added
// pairwise, then the group's lanes by shuffles (a fixed order).
static_assert(32 * kScanWarps == kLanes * 2 * kStageRows, "kLanes threads per q and k vector of a stage");
__device__ __forceinline__ void PrepareStage(ScanStage& st, int rows, int dk, float eps, float ssm_a,
                                             float dt_bias) {
  const int item = static_cast<int>(threadIdx.x) / kLanes, part = static_cast<int>(threadIdx.x) % kLanes;
  float4* v = reinterpret_cast<float4*>(st.qk[item / 2] + (item % 2) * kMaxKDim) + part;
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma unroll
  for (int u = 0; u < kChunks; ++u) {
    const float4 x = v[kLanes * u];
    s0 += x.x * x.x;
    s1 += x.y * x.y;
    s2 += x.z * x.z;
    s3 += x.w * x.w;
  }
  const float ss = ColumnSum((s0 + s1) + (s2 + s3));
  float inv = rsqrtf(ss + eps);
  if (item % 2 == 0) inv *= rsqrtf(static_cast<float>(dk));
  if (item / 2 < rows) {  // read again rather than held: the state's registers are live around this
#pragma unroll
    for (int u = 0; u < kChunks; ++u) {
      const float4 x = v[kLanes * u];
      v[kLanes * u] = make_float4(x.x * inv, x.y * inv, x.z * inv, x.w * inv);
    }
  }
  if (static_cast<int>(threadIdx.x) < rows) {
    float* g = st.gates[threadIdx.x];
    const float beta = 1.0f / (1.0f + expf(-g[0]));
    g[0] = expf(ssm_a * Softplus(g[1] + dt_bias));
    g[1] = beta;
  }
}

__global__ void __launch_bounds__(32 * kScanWarps)
    DeltaNetRuleKernel(const float* x, const float* b, const float* a, const float* ssm_a,
                       const float* dt_bias, const DeltaNetDevice d, const int32_t* seqs, float* out) {
  AfterPrevious();
  __shared__ ScanStage stage[2];
  const int nv = static_cast<int>(d.n_v_head), dk = static_cast<int>(d.k_dim), dv = static_cast<int>(d.v_dim);
  const int groups = (dv + kScanCols - 1) / kScanCols;
  const int seq = static_cast<int>(blockIdx.x) / (nv * groups),
            h = static_cast<int>(blockIdx.x) / groups % nv, g = static_cast<int>(blockIdx.x) % groups;
  const int32_t* s = seqs + 3 * seq;
  const int64_t row0 = s[0];
  const int n = s[1];
  float* S = reinterpret_cast<float*>(d.states + static_cast<size_t>(s[2]) * d.slot_bytes + d.rule_offset) +
             static_cast<int64_t>(h) * dk * dv;
  const int p = static_cast<int>(threadIdx.x) % kLanes, c = static_cast<int>(threadIdx.x) / kLanes;
  const int col0 = g * kScanCols, j = col0 + c;
  const bool col = j < dv;
  // Columns of q and k past k_dim are never copied; zeros there keep the unrolled loops exact.
  if (dk < kMaxKDim) {
    for (int w = 0; w < 2; ++w) {
      for (int i = threadIdx.x; i < kStageRows * 2 * kMaxKDim; i += blockDim.x) {
        if (i % kMaxKDim >= dk) (&stage[w].qk[0][0])[i] = 0.0f;
      }
    }
  }
  if (n > 0) LoadStage(stage[0], x, b, a, d, row0, n, h, col0);
  const float head_a = ssm_a[h], head_dt = dt_bias[h];
  float4 st[kChunks];
#pragma unroll
  for (int u = 0; u < kChunks; ++u) {
    const int i = 4 * (kLanes * u + p);
    const bool in = col && i < dk;
    st[u].x = in ? S[(i + 0) * dv + j] : 0.0f;
    st[u].y = in ? S[(i + 1) * dv + j] : 0.0f;
    st[u].z = in ? S[(i + 2) * dv + j] : 0.0f;
    st[u].w = in ? S[(i + 3) * dv + j] : 0.0f;
  }
  float* o_col = out + row0 * nv * dv + h * dv + j;
  for (int r0 = 0; r0 < n; r0 += kStageRows) {
    ScanStage& cur = stage[(r0 / kStageRows) % 2];
    if (r0 + kStageRows < n) {
      LoadStage(stage[(r0 / kStageRows + 1) % 2], x, b, a, d, row0 + r0 + kStageRows, n - r0 - kStageRows, h,
                col0);
      CopyWait<1>();
    } else {
      CopyWait<0>();
    }
    const int rows = n - r0 < kStageRows ? n - r0 : kStageRows;
    __syncthreads();
    PrepareStage(cur, rows, dk, d.eps, head_a, head_dt);
    __syncthreads();
    for (int r = 0; r < rows; ++r) {
      const float dec = cur.gates[r][0], bet = cur.gates[r][1], v = cur.v[r][c];
      const float4* q4 = reinterpret_cast<const float4*>(cur.qk[r]) + p;
      const float4* k4 = reinterpret_cast<const float4*>(cur.qk[r] + kMaxKDim) + p;
      // S *= decay; mem = k^T S over this lane's rows (four running sums), then the column's lanes.
      float m0 = 0.0f, m1 = 0.0f, m2 = 0.0f, m3 = 0.0f;
#pragma unroll
      for (int u = 0; u < kChunks; ++u) {
        const float4 k = k4[kLanes * u];
        st[u].x *= dec;
        st[u].y *= dec;
        st[u].z *= dec;
        st[u].w *= dec;
        m0 += st[u].x * k.x;
        m1 += st[u].y * k.y;
        m2 += st[u].z * k.z;
        m3 += st[u].w * k.w;
      }
      const float mem = ColumnSum((m0 + m1) + (m2 + m3));
      const float delta = (v - mem) * bet;
      // S += k delta^T; o = q^T S.
      float o0 = 0.0f, o1 = 0.0f, o2 = 0.0f, o3 = 0.0f;
#pragma unroll
      for (int u = 0; u < kChunks; ++u) {
        const float4 k = k4[kLanes * u], q = q4[kLanes * u];
        st[u].x += k.x * delta;
        st[u].y += k.y * delta;
        st[u].z += k.z * delta;
        st[u].w += k.w * delta;
        o0 += st[u].x * q.x;
        o1 += st[u].y * q.y;
        o2 += st[u].z * q.z;
        o3 += st[u].w * q.w;
      }
      const float o = ColumnSum((o0 + o1) + (o2 + o3));
      if (col && p == 0) o_col[static_cast<int64_t>(r0 + r) * nv * dv] = o;
    }
    __syncthreads();  // the next stage's copies go into the buffer just read
  }
#pragma unroll
  for (int u = 0; u < kChunks; ++u) {
    const int i = 4 * (kLanes * u + p);
    if (col && i < dk) {
      S[(i + 0) * dv + j] = st[u].x;
      S[(i + 1) * dv + j] = st[u].y;
      S[(i + 2) * dv + j] = st[u].z;
      S[(i + 3) * dv + j] = st[u].w;
    }
  }
}

}  // namespace

cudaError_t SigmoidMul(float* x, const float* g, int64_t rows, int64_t cols, int8_t* q, float* d, int group,
                       cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  if (q != nullptr && (cols % 32 != 0 || (group != 32 && group != kKQuantGroup)))
    return cudaErrorInvalidValue;
  if (q == nullptr || group == 32) {
    return Launch(PairKernel<SigmoidTimesOp>, Blocks(n, kThreads), kThreads, 0, stream, x, g, n, q, d);
  }
  const int64_t groups = rows * ((cols + kKQuantGroup - 1) / kKQuantGroup);
  return Launch(PairGroupsKernel<SigmoidTimesOp>, static_cast<unsigned>(groups), kKQuantGroup, 0, stream, x,
                g, cols, q, d);
}

cudaError_t SplitHeads(const float* x, int64_t heads, int64_t head_dim, float* a, float* b,
                       cudaStream_t stream) {
  return Launch(SplitHeadsKernel, Blocks(heads * head_dim, kThreads), kThreads, 0, stream, x, heads, head_dim,
                a, b);
}

cudaError_t GatedRmsNorm(float* x, const float* w, const float* z, int64_t rows, int64_t cols, float eps,
                         int8_t* q, float* d, int group, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (q == nullptr || group == 32) {
    if (q != nullptr && cols % 32 != 0) return cudaErrorInvalidValue;
    return Launch(GatedRmsNormKernel, Blocks(rows, kThreads / 32), kThreads, 0, stream, x, w, z, rows, cols,
                  eps, q, d);
  }
  if (group != kKQuantGroup || !GatedNormShadowGroups(rows, cols)) return cudaErrorInvalidValue;
  return Launch(GatedRmsNormGroupsKernel, static_cast<unsigned>(rows * cols / kKQuantGroup), kKQuantGroup, 0,
                stream, x, w, z, rows, cols, eps, q, d);
}

cudaError_t DeltaNetConv(float* x, const float* w, const DeltaNetDevice& d, const int32_t* seqs,
                         int64_t n_seqs, int64_t rows, cudaStream_t stream) {
  if (n_seqs == 0) return cudaSuccess;
  const char* serial = std::getenv("FAK_CUDA_CONV_SERIAL");
  if (d.conv_kernel == kConvHist + 1 && rows >= 4 * kConvRun * n_seqs && n_seqs <= 65535 &&
      (serial == nullptr || serial[0] != '1')) {
    const dim3 grid(Blocks(d.conv_dim, 32), static_cast<unsigned>(n_seqs));
    return Launch(DeltaNetConvRowsKernel, grid, 32 * kConvChunks, 0, stream, x, w, d, seqs);
  }
  // The window's registers hold up to 15 inputs; the grid's y dimension takes up to 65,535 sequences
  // (BindDeltaNet and the batch limits keep both far below).
  if (d.conv_kernel < 1 || d.conv_kernel > 16 || n_seqs > 65535) return cudaErrorInvalidValue;
  const dim3 grid(Blocks(d.conv_dim, 64), static_cast<unsigned>(n_seqs));
  if (d.conv_kernel == 4) return Launch(DeltaNetConvKernel<3>, grid, 64, 0, stream, x, w, d, seqs);
  return Launch(DeltaNetConvKernel<0>, grid, 64, 0, stream, x, w, d, seqs);
}

cudaError_t DeltaNetRule(const float* x, const float* b, const float* a, const float* ssm_a,
                         const float* dt_bias, const DeltaNetDevice& d, const int32_t* seqs, int64_t n_seqs,
                         float* out, cudaStream_t stream) {
  if (n_seqs == 0) return cudaSuccess;
  // The copies' alignment and the registers (BindDeltaNet checks these).
  if (d.k_dim > kMaxKDim || d.k_dim % 4 != 0 || d.conv_dim % 4 != 0) return cudaErrorInvalidValue;
  const int64_t groups = (d.v_dim + kScanCols - 1) / kScanCols;
  return Launch(DeltaNetRuleKernel, static_cast<unsigned>(n_seqs * d.n_v_head * groups), 32 * kScanWarps, 0,
                stream, x, b, a, ssm_a, dt_bias, d, seqs, out);
}

}  // namespace fak::cuda
