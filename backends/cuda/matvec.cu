// Matrix times a few activation rows (decode), for every weight format.
//
// Quantized formats (Q8_0, Q4_K, Q6_K) sum each row in the order qblock.cuh defines, shared with the
// tensor-core GEMM of gemm.cu that MatVec hands larger batches to: a warp (P warps for long rows, one
// per piece) walks its piece four segments at a time, lane l on block l % 8 of segment l / 8; a butterfly
// over each 8 lanes is the segment's tree (Q8_0) or its integer sums (the K-quants), and the segments'
// terms are added to the piece's sum in order by shuffles. f32, f16 and bf16 weights (f32 activations) keep a
// per-lane fused-multiply-add chain over 16-byte chunks and a butterfly, and never go to the GEMM. A warp
// handles up to R activation rows at once (the weights are loaded once for all of them) and the grid tiles
// the rest, so the value of y[r][o] depends only on the weight row and activation row r: never on R, the
// tile, or the batch size. One activation row of a matrix with many wide rows goes to the whole-row kernel of
// matvec_rows.cu instead (MatVecRowsTakes), the same bits.
//
// Napkin math (H200, 4.2 TB/s copy): a 1536 x 8960 Q8_0 matrix is 14.6 MB, so ~3.5 us at the copy rate;
// one warp per row keeps 8960 warps x 32 B x the unrolled loads in flight.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/kernels.h"
#include "backends/cuda/pdl.cuh"
#include "backends/cuda/qblock.cuh"
#include "backends/cuda/row_ops.cuh"

namespace fak::cuda {
namespace {

constexpr int kWarps = 4;          // output rows per block of 128 threads
constexpr int kGemmMinRows = 16;   // batches of this many rows or more go to the GEMM (same bits)
constexpr int kTailNormRuns = 12;  // a d_model of 1536 in registers (4 warps); wider rows read the rest again

__device__ __forceinline__ float Half(uint16_t h) { return HalfBits(h); }

// The terms of block b of weight row o against activation rows r0 .. r0 + nr - 1 (qblock.cuh).
struct Q8_0 {
  static constexpr bool kQuant = true, kSegInt = false;
  static __device__ int64_t RowBytes(int64_t cols) { return cols; }
  static __device__ int64_t ScaleBytes(int64_t cols) { return cols / 32 * 2; }
  template <int R>
  static __device__ void Terms(const DeviceMatrix& w, Q8Act x, int64_t o, int64_t b, int64_t r0, int nr,
                               float* t) {
    const int64_t nb = w.cols / 32;
    const uint8_t* wp = w.q + o * w.cols + b * 32;
    const int4 w0 = Load16(wp), w1 = Load16(wp + 16);
    const float dw = Half(w.d[o * nb + b]);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= nr) break;
      const int64_t row = r0 + r;
      const int8_t* xp = x.q + row * w.cols + b * 32;
      const int4 x0 = Load16(xp), x1 = Load16(xp + 16);
      t[r] = Q8_0Term(Dot16(w0, x0) + Dot16(w1, x1) + kExactBias, dw, x.d[row * nb + b]);
    }
  }
};

// The K-quants (qblock.cuh): block b's integer parts of its segment's sums (Parts: s1, and Q4_K's s2,
// for activation rows r0 ..), added over the segment's 8 blocks in integers, then the segment's term
// (SegTerm) from the super-block's scales (d, dmin) and the activations' scale for the segment.
//
// Q4_K: 144-byte blocks as stored (16-byte header d, dmin, scales[12], then 128 bytes of nibbles).
// Sub-block s of a super-block is the low (s even) or high (s odd) nibbles of qs[32 (s / 2) ..][32].
struct Q4_K {
  static constexpr bool kQuant = true, kSegInt = true;
  static __device__ int64_t RowBytes(int64_t cols) { return cols / 256 * 144; }
  static __device__ int64_t ScaleBytes(int64_t) { return 0; }
  template <int R>
  static __device__ void Parts(const DeviceMatrix& w, Q8Act x, int64_t o, int64_t b, int64_t r0, int nr,
                               int* s1, int* s2, float* d, float* dmin) {
    const int s = static_cast<int>(b & 7), j = s >> 1;
    const uint8_t* blk = w.q + (o * (w.cols / 256) + (b >> 3)) * 144;
    const int4 head = Load16(blk);
    const int shift = 4 * (s & 1);
    const int4 n0 = And(Shr(Load16(blk + 16 + 32 * j), shift), 0x0F0F0F0F);
    const int4 n1 = And(Shr(Load16(blk + 32 + 32 * j), shift), 0x0F0F0F0F);
    const uint8_t* hb = reinterpret_cast<const uint8_t*>(&head);
    int sc, m;
    Q4_KScaleMin(hb + 4, s, &sc, &m);
    *d = Half(static_cast<uint16_t>(head.x & 0xFFFF));
    *dmin = Half(static_cast<uint16_t>(static_cast<unsigned>(head.x) >> 16));
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= nr) break;
      const int8_t* xp = x.q + (r0 + r) * w.cols + b * 32;
      const int4 x0 = Load16(xp), x1 = Load16(xp + 16);
      s1[r] = sc * Dot16(n1, x1, Dot16(n0, x0));
      s2[r] = m * (Sum16(x0) + Sum16(x1));
    }
  }
  static __device__ float SegTerm(int s1, int s2, float d, float dmin, float dx) {
    return Q4_KSegTerm(s1, s2 + kExactBias, d, dmin, dx);
  }
};

// Q6_K repacked (weights.h): 208-byte blocks (ql[128], qh[64], scales[16]) and the f16 d apart.
// Block s = 4n + k of a super-block holds weights 128n + 32k + l (l < 32): low 4 bits in the low
// (k < 2) or high nibbles of ql[64n + 32 (k % 2) + l], high 2 bits at bit 2k of qh[32n + l], scales
// scales[2s] (l < 16) and scales[2s + 1].
struct Q6_K {
  static constexpr bool kQuant = true, kSegInt = true;
  static __device__ int64_t RowBytes(int64_t cols) { return cols / 256 * 208; }
  static __device__ int64_t ScaleBytes(int64_t cols) { return cols / 256 * 2; }
  template <int R>
  static __device__ void Parts(const DeviceMatrix& w, Q8Act x, int64_t o, int64_t b, int64_t r0, int nr,
                               int* s1, int*, float* d, float*) {
    const int64_t sb = o * (w.cols / 256) + (b >> 3);
    const int s = static_cast<int>(b & 7), n = s >> 2, k = s & 3;
    const uint8_t* blk = w.q + sb * 208;
    const int shift = k >= 2 ? 4 : 0;
    const uint8_t* ql = blk + 64 * n + 32 * (k & 1);
    const uint8_t* qh = blk + 128 + 32 * n;
    const int4 q0 =
        Q6Values(And(Shr(Load16(ql), shift), 0x0F0F0F0F), And(Shr(Load16(qh), 2 * k), 0x03030303));
    const int4 q1 =
        Q6Values(And(Shr(Load16(ql + 16), shift), 0x0F0F0F0F), And(Shr(Load16(qh + 16), 2 * k), 0x03030303));
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 2 * s);
    const int sc_lo = sc[0], sc_hi = sc[1];
    *d = Half(w.d[sb]);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= nr) break;
      const int8_t* xp = x.q + (r0 + r) * w.cols + b * 32;
      s1[r] = sc_lo * Dot16(q0, Load16(xp)) + sc_hi * Dot16(q1, Load16(xp + 16));
    }
  }
  static __device__ float SegTerm(int s1, int, float d, float, float dx) { return Q6_KSegTerm(s1, d, dx); }
};

// F16 / BF16 / F32: chunk c is 16 bytes of the row; activations in f32.
template <MatFormat F>
struct Float {
  static constexpr bool kQuant = false;
  static constexpr int kWeightsPerChunk = F == MatFormat::kF32 ? 4 : 8;
  static __device__ int64_t RowBytes(int64_t cols) { return cols * (F == MatFormat::kF32 ? 4 : 2); }
  static __device__ int64_t ScaleBytes(int64_t) { return 0; }
  template <int R>
  static __device__ void Dot(const DeviceMatrix& w, const float* x, int64_t o, int64_t c, int64_t r0, int nr,
                             float* acc) {
    constexpr int kN = kWeightsPerChunk;
    const int4 raw = Load16(w.q + (o * w.cols + c * kN) * (F == MatFormat::kF32 ? 4 : 2));
    float wv[kN];
    if constexpr (F == MatFormat::kF32) {
      wv[0] = __int_as_float(raw.x), wv[1] = __int_as_float(raw.y), wv[2] = __int_as_float(raw.z),
      wv[3] = __int_as_float(raw.w);
    } else {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(&raw);
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        wv[i] = F == MatFormat::kF16 ? Half(h[i]) : __uint_as_float(static_cast<uint32_t>(h[i]) << 16);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= nr) break;
      const float4* xr = reinterpret_cast<const float4*>(x + (r0 + r) * w.cols + c * kN);
      float xv[kN];
#pragma unroll
      for (int i = 0; i < kN / 4; ++i) {
        const float4 t = __ldg(xr + i);
        xv[4 * i] = t.x, xv[4 * i + 1] = t.y, xv[4 * i + 2] = t.z, xv[4 * i + 3] = t.w;
      }
#pragma unroll
      for (int i = 0; i < kN; ++i) acc[r] = __fmaf_rn(wv[i], xv[i], acc[r]);
    }
  }
};

// Warps per output row: long rows are split over the 4 warps of a block so a matrix with few rows
// still has enough loads in flight. A function of the row length alone, like everything that decides
// the order of a row's sum. Float formats: warp p takes every 4th run of 32 chunks; quantized formats:
// the pieces of qblock.cuh.
template <class F>
__host__ __device__ constexpr int WarpsPerRow(int64_t cols) {
  if constexpr (F::kQuant) {
    return QuantPieces(cols);
  } else {
    return cols / F::kWeightsPerChunk >= 256 ? kWarps : 1;
  }
}

// The sum of this warp's share of row o (one f32 per activation row) for a float format: per-lane
// chains over the chunks c = piece * 32 + lane + k * 32 * WPR, then a butterfly.
template <class F, int R, int WPR>
__device__ __forceinline__ void FloatRowSum(const DeviceMatrix& w, const float* x, int64_t o, int piece,
                                            int lane, int64_t r0, int nr, float* acc) {
  const int64_t chunks = w.cols / F::kWeightsPerChunk, step = 32 * WPR;
  int64_t c = piece * 32 + lane;
  // Two chunks per iteration so their loads are in flight together; the sums stay in chunk order.
  for (; c + step < chunks; c += 2 * step) {
    F::template Dot<R>(w, x, o, c, r0, nr, acc);
    F::template Dot<R>(w, x, o, c + step, r0, nr, acc);
  }
  if (c < chunks) F::template Dot<R>(w, x, o, c, r0, nr, acc);
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], m);
  }
}

// The same for a quantized format, in qblock.cuh's order: four segments per round, lane l on block
// l % 8 of segment l / 8; the xor butterfly over 8 lanes builds each segment's tree (float addition
// is commutative, so both lanes of a pair hold the same bits), then the round's segments are added
// in order. Every lane ends with the piece's sum.
template <class F, int R, int WPR>
__device__ __forceinline__ void QuantRowSum(const DeviceMatrix& w, Q8Act xq, int64_t o, int piece, int lane,
                                            int64_t r0, int nr, float* acc) {
  const int64_t nb = w.cols / 32, ng = QuantSegments(w.cols);
  const int64_t g_end = PieceBegin(ng, WPR, piece + 1);
  // A single activation row: four rounds' loads in flight (a long row's piece is about three rounds);
  // more rows: two, which keeps the registers within bounds.
#pragma unroll(R <= 2 ? 4 : 2)
  for (int64_t g0 = PieceBegin(ng, WPR, piece); g0 < g_end; g0 += 4) {
    const int64_t g = g0 + (lane >> 3), b = g * kBlocksPerSegment + (lane & 7);
    float t[R];
#pragma unroll
    for (int r = 0; r < R; ++r) t[r] = 0.0f;
    if constexpr (F::kSegInt) {  // the K-quants: the segment's integer sums, then its term
      int s1[R], s2[R];
      float d = 0.0f, dmin = 0.0f;
#pragma unroll
      for (int r = 0; r < R; ++r) s1[r] = s2[r] = 0;
      const bool on = g < g_end;  // cols is a multiple of 256: every block of the segment exists
      if (on) F::template Parts<R>(w, xq, o, b, r0, nr, s1, s2, &d, &dmin);
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int m = 1; m < 8; m <<= 1) {
          s1[r] += __shfl_xor_sync(0xffffffffu, s1[r], m);
          s2[r] += __shfl_xor_sync(0xffffffffu, s2[r], m);
        }
        if (on && r < nr) t[r] = F::SegTerm(s1[r], s2[r], d, dmin, xq.d[(r0 + r) * nb + 8 * g]);
      }
    } else {
      if (g < g_end && b < nb) F::template Terms<R>(w, xq, o, b, r0, nr, t);
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int m = 1; m < 8; m <<= 1) t[r] = __fadd_rn(t[r], __shfl_xor_sync(0xffffffffu, t[r], m));
      }
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (g0 + k >= g_end) break;
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = __fadd_rn(acc[r], __shfl_sync(0xffffffffu, t[r], 8 * k));
    }
  }
}

// Brings this warp's share of weight row o (piece `piece` of `pieces`) and its scales into L2: weights
// no kernel writes, so this runs before the wait for the previous kernel.
template <class F>
__device__ __forceinline__ void PrefetchRow(const DeviceMatrix& w, int64_t o, int piece, int pieces,
                                            int lane) {
  const int64_t bytes = F::RowBytes(w.cols);
  const uint8_t* row = w.q + o * bytes;
  const int64_t lo = (bytes * piece / pieces) & ~int64_t{127}, hi = bytes * (piece + 1) / pieces;
  for (int64_t off = lo + lane * 128; off < hi; off += 32 * 128) PrefetchL2(row + off);
  const int64_t sbytes = F::ScaleBytes(w.cols);
  if (sbytes > 0 && piece == 0) {
    const auto* scales = reinterpret_cast<const uint8_t*>(w.d) + o * sbytes;
    for (int64_t off = lane * 128; off < sbytes; off += 32 * 128) PrefetchL2(scales + off);
  }
}

// Blocks [first[k], first[k + 1]) of the grid compute matrix k of the job; each block computes
// kWarps / WPR output rows at a time, `rounds` times: round i takes the rows of block lb + i * nblk of a
// grid of nblk blocks per round, so the blocks working at any moment read neighbouring rows. More than
// one round amortizes a warp's fixed cost (finding its matrix, the wait, the sum's tail and the store)
// over several rows of a large matrix; a row's sum is the same whatever the round.
// The RMS norm tail of a one-row product, run by the grid's last block once every block's results are
// visible: every thread fences its stores, one thread per block counts the block done, and the block
// that counts last fences again, runs the norm (reading the others' results from L2) and sets the
// counter back to zero for the next launch.
__device__ __forceinline__ void NormTailIfLast(const MatVecTail& t) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(t.counter, 1u) == gridDim.x * gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  RmsNormRow<kTailNormRuns>(t.x, t.w, t.y, t.cols, t.eps, t.q, t.d, 0);
  if (threadIdx.x == 0) *t.counter = 0;
}

// The SiLU and rope tails need only a group of rows, not the whole product: 32 consecutive elements
// of the gate/up output (one block of its int8 shadow), or one head of q or k. Each block, after a
// round's rows are stored, adds their count to its group's counter (t.counter[group]); the block that
// completes the group (`target` rows) runs the op on that group alone and zeroes the counter. No block
// waits for another, and the op's elements are computed by the same device functions as its kernel.
__device__ __forceinline__ bool CompletesGroup(const MatVecTail& t, int64_t group, unsigned rows,
                                               unsigned target) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(t.counter + group, rows) + rows == target;
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// silu(g) * u of group j (elements 32j ..) by warp 0, as PairKernel<SiluTimesOp> computes each element.
__device__ __forceinline__ void SiluGroup(const MatVecTail& t, int64_t j) {
  if (threadIdx.x < 32) {
    const int64_t i = j * 32 + threadIdx.x;
    if (i < t.cols) {
      const float v = SiluTimes(__ldcg(t.y + i), __ldcg(t.u + i));
      t.y[i] = v;
      if (t.q != nullptr) QuantizeLane(v, i, t.q, t.d);  // cols is a multiple of 32 with a shadow
    }
  }
  if (threadIdx.x == 0) t.counter[j] = 0;
}

// Element i (of head h) of the one row's keys (which 0) or values (1) into the KV store, whose page
// starts at `base` (KvPageBase, found before the wait for the previous kernel).
__device__ __forceinline__ void KvStore(const MatVecTail& t, void* base, uint32_t pos, int which, int64_t h,
                                        int64_t i, float value) {
  const int64_t at = KvElement(t.kv, t.layer, which, h, pos, i);
  if (t.kv.f32) {
    KvPut(static_cast<float*>(base), at, value);
  } else {
    KvPut(static_cast<__half*>(base), at, value);
  }
}

// Rope of head h of x (a q head, or with `key` a k head whose rotated values and the dims past the
// rotary part also go to the KV store), as RopeKvWriteRow computes each pair.
__device__ __forceinline__ void RopeHead(const MatVecTail& t, float* x, int64_t h, bool key, int64_t group,
                                         void* base, uint32_t pos) {
  const int64_t half = t.half, hd = t.head_dim;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const int64_t a = t.neox ? i : 2 * i, c = t.neox ? i + half : 2 * i + 1;
    const float x0 = __ldcg(x + a), x1 = __ldcg(x + c), cv = t.cos_sin[i], sv = t.cos_sin[half + i];
    const float ya = RotA(x0, x1, cv, sv), yc = RotB(x0, x1, cv, sv);
    x[a] = ya;
    x[c] = yc;
    if (key) {
      KvStore(t, base, pos, 0, h, a, ya);
      KvStore(t, base, pos, 0, h, c, yc);
    }
  }
  if (key) {
    for (int64_t i = 2 * half + threadIdx.x; i < hd; i += blockDim.x)
      KvStore(t, base, pos, 0, h, i, __ldcg(x + i));
  }
  if (threadIdx.x == 0) t.counter[group] = 0;
}

// After a round of matrix k of the job stored rows [row0, row0 + rows): the group arrivals of the SiLU
// and rope tails.
template <int kTail>
__device__ __forceinline__ void GroupTail(const MatVecJob& job, int k, int64_t row0, unsigned rows,
                                          void* kv_base, uint32_t kv_pos) {
  const MatVecTail& t = job.tail;
  if constexpr (kTail == static_cast<int>(TailKind::kSiluMul)) {
    const int64_t j = row0 / 32;
    const auto target = static_cast<unsigned>(2 * (t.cols - j * 32 < 32 ? t.cols - j * 32 : 32));
    if (CompletesGroup(t, j, rows, target)) SiluGroup(t, j);
  } else if constexpr (kTail == static_cast<int>(TailKind::kRopeKvWrite)) {
    const int first_key = t.rq != nullptr ? 1 : 0;
    if (k > first_key) return;  // values: stored as their rows are computed
    // 32-bit divisions (a 64-bit division by a runtime value is a long call).
    const auto hd = static_cast<uint32_t>(t.head_dim);
    const int64_t h = static_cast<uint32_t>(row0) / hd,
                  nq = t.rq != nullptr ? static_cast<uint32_t>(t.q_cols) / hd : 0;
    const int64_t group = k == first_key ? nq + h : h;
    if (!CompletesGroup(t, group, rows, static_cast<unsigned>(t.head_dim))) return;
    const bool key = k == first_key;
    RopeHead(t, (key ? t.k : t.rq) + h * t.head_dim, h, key, group, kv_base, kv_pos);
  }
}

// The blocks per multiprocessor a kernel with a tail is compiled for. The SiLU's products (gate and up)
// have more blocks than the GPU holds at once, so their kernel keeps the registers of the kernel without
// a tail (ptxas: Q8_0 40, Q4_K 48, Q6_K 64, the float formats up to 48) and spills what the tail needs
// beyond them; the norm's and the rope's products (o, down; q, k, v) have a few blocks per
// multiprocessor, so theirs may take more registers.
template <class F>
constexpr int kTailMinBlocks = 10;
template <>
constexpr int kTailMinBlocks<Q8_0> = 12;
template <>
constexpr int kTailMinBlocks<Q6_K> = 8;
template <class F, int kTail>
constexpr int TailMinBlocks() {
  return kTail == static_cast<int>(TailKind::kSiluMul) ? kTailMinBlocks<F> : 6;
}

template <class F, int R, int WPR, int kTail>
__device__ __forceinline__ void MatVecBody(const MatVecJob& job, const float* x, Q8Act xq, int64_t n,
                                           int rounds) {
  constexpr int kRowsPerBlock = kWarps / WPR;
  __shared__ float part[kWarps][R];
  int k = 0;
  const int64_t per_block = static_cast<int64_t>(kRowsPerBlock) * rounds;
  int64_t first = 0, blocks = (job.w[0].rows + per_block - 1) / per_block;
  while (k + 1 < job.count && blockIdx.x >= first + blocks) {
    first += blocks;
    ++k;
    blocks = (job.w[k].rows + per_block - 1) / per_block;
  }
  const DeviceMatrix& w = job.w[k];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, piece = warp % WPR;
  const int64_t lb = static_cast<int64_t>(blockIdx.x) - first;
  auto row_of = [&](int i) { return (lb + i * blocks) * kRowsPerBlock + warp / WPR; };
  if (blockIdx.y == 0) {
    for (int i = 0; i < rounds; ++i) {
      if (row_of(i) < w.rows) PrefetchRow<F>(w, row_of(i), piece, WPR, lane);
    }
  }
  // The rope tail's KV page, from the batch arrays the step uploads before its kernels (no kernel
  // writes them), before the wait.
  void* kv_base = nullptr;
  uint32_t kv_pos = 0;
  if constexpr (kTail == static_cast<int>(TailKind::kRopeKvWrite)) {
    kv_base = KvPageBase<uint8_t>(job.tail.kv, job.tail.b, 0, &kv_pos);
  }
  AfterPrevious();
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * R;
  const int nr = static_cast<int>(n - r0 < R ? n - r0 : R);
  const MatVecOut out = job.out[k];
  for (int i = 0; i < rounds; ++i) {
    const int64_t o = row_of(i);
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    if (o < w.rows) {
      if constexpr (F::kQuant) {
        QuantRowSum<F, R, WPR>(w, xq, o, piece, lane, r0, nr, acc);
      } else {
        FloatRowSum<F, R, WPR>(w, x, o, piece, lane, r0, nr, acc);
      }
    }
    if constexpr (WPR > 1) {
      if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r) part[warp][r] = acc[r];
      }
      __syncthreads();
      if (piece == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float v = part[warp][r];
#pragma unroll
          for (int p = 1; p < WPR; ++p) v = __fadd_rn(v, part[warp + p][r]);
          acc[r] = v;
        }
      }
      if (i + 1 < rounds) __syncthreads();  // part is rewritten in the next round
    }
    if (lane == 0 && piece == 0 && o < w.rows) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r >= nr) break;
        StoreResult(out, r0 + r, o, acc[r]);
      }
      if constexpr (kTail == static_cast<int>(TailKind::kRopeKvWrite)) {
        // A value row goes to the KV store as it is computed (StoreResult's value, bias and all).
        if (k == job.count - 1) {
          const float v = out.bias != nullptr ? acc[0] + out.bias[o] : acc[0];
          const auto hd = static_cast<uint32_t>(job.tail.head_dim), uo = static_cast<uint32_t>(o);
          KvStore(job.tail, kv_base, kv_pos, 1, uo / hd, uo % hd, v);
        }
      }
    }
    if constexpr (kTail == static_cast<int>(TailKind::kSiluMul) ||
                  kTail == static_cast<int>(TailKind::kRopeKvWrite)) {
      const int64_t row0 = (lb + i * blocks) * kRowsPerBlock;
      if (row0 < w.rows) {
        GroupTail<kTail>(job, k, row0,
                         static_cast<unsigned>(w.rows - row0 < kRowsPerBlock ? w.rows - row0 : kRowsPerBlock),
                         kv_base, kv_pos);
      }
    }
  }
  if constexpr (kTail == static_cast<int>(TailKind::kRmsNorm)) NormTailIfLast(job.tail);
}

template <class F, int R, int WPR>
__global__ void __launch_bounds__(kWarps * 32)
    MatVecKernel(MatVecJob job, const float* x, Q8Act xq, int64_t n, int rounds) {
  MatVecBody<F, R, WPR, 0>(job, x, xq, n, rounds);
}

// One activation row with a tail of kind kTail.
template <class F, int WPR, int kTail>
__global__ void __launch_bounds__(kWarps * 32, (TailMinBlocks<F, kTail>()))
    MatVecTailKernel(MatVecJob job, const float* x, Q8Act xq, int64_t n, int rounds) {
  MatVecBody<F, 1, WPR, kTail>(job, x, xq, n, rounds);
}

// Rounds per block: 1, or for a job of many blocks (gate/up of the larger models, the output layer)
// kRowRounds, keeping at least kMinBlocksPerSm blocks per multiprocessor. Measured on an H200 (1.5B
// geometry, one sequence, rounds 1 / 2 / 4 alternating): Q4_K_M 547-548 / 561-576 / 558 tok/s, Q8_0
// 624-632 / 629-630 / 602-603. FAK_CUDA_MATVEC_ROUNDS=N overrides kRowRounds (for comparisons).
constexpr int kRowRounds = 2;
constexpr int64_t kMinBlocksPerSm = 8;
int RowRounds(int64_t blocks) {
  const char* v = std::getenv("FAK_CUDA_MATVEC_ROUNDS");
  const int rounds = v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : kRowRounds;
  const int64_t sms = std::max(1, MultiprocessorCount());
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(rounds, blocks / (kMinBlocksPerSm * sms))));
}

template <class F, int R, int WPR>
cudaError_t LaunchR(const MatVecJob& job, const float* x, Q8Act xq, int64_t n, cudaStream_t s) {
  constexpr int kRowsPerBlock = kWarps / WPR;
  auto blocks = [&](int64_t rows_per_block) {  // the kernel's count: ceil(rows / rows_per_block) per matrix
    int64_t total = 0;
    for (int k = 0; k < job.count; ++k) total += (job.w[k].rows + rows_per_block - 1) / rows_per_block;
    return total;
  };
  const int rounds = RowRounds(blocks(kRowsPerBlock));
  const dim3 grid(static_cast<unsigned>(blocks(int64_t{kRowsPerBlock} * rounds)),
                  static_cast<unsigned>((n + R - 1) / R));
  if constexpr (R == 1) {
    switch (job.tail.kind) {
      case TailKind::kNone: break;
      case TailKind::kRmsNorm:
        return Launch(MatVecTailKernel<F, WPR, 1>, grid, kWarps * 32, 0, s, job, x, xq, n, rounds);
      case TailKind::kSiluMul:
        return Launch(MatVecTailKernel<F, WPR, 2>, grid, kWarps * 32, 0, s, job, x, xq, n, rounds);
      case TailKind::kRopeKvWrite:
        return Launch(MatVecTailKernel<F, WPR, 3>, grid, kWarps * 32, 0, s, job, x, xq, n, rounds);
    }
  }
  return Launch(MatVecKernel<F, R, WPR>, grid, kWarps * 32, 0, s, job, x, xq, n, rounds);
}

template <class F, int R>
cudaError_t LaunchW(const MatVecJob& job, const float* x, Q8Act xq, int64_t n, cudaStream_t s) {
  if (WarpsPerRow<F>(job.w[0].cols) == kWarps) {
    return LaunchR<F, R, kWarps>(job, x, xq, n, s);
  }
  return LaunchR<F, R, 1>(job, x, xq, n, s);
}

template <class F>
cudaError_t Launch(const MatVecJob& job, const float* x, Q8Act xq, int64_t n, cudaStream_t s) {
  if (n == 1) return LaunchW<F, 1>(job, x, xq, n, s);
  if (n == 2) return LaunchW<F, 2>(job, x, xq, n, s);
  if (n <= 4) return LaunchW<F, 4>(job, x, xq, n, s);
  return LaunchW<F, 8>(job, x, xq, n, s);
}

// The tail of a product whose activations are more than one row, or whose kind runs apart: the op's
// own kernel after the product (the same device functions as in the product's last block).
cudaError_t LaunchTail(const MatVecTail& t, int64_t rows, cudaStream_t stream) {
  switch (t.kind) {
    case TailKind::kNone: return cudaSuccess;
    case TailKind::kRmsNorm: return RmsNorm(t.x, t.w, t.y, rows, t.cols, t.eps, t.q, t.d, t.group, stream);
    case TailKind::kSiluMul: return SiluMul(t.y, t.u, rows, t.cols, t.q, t.d, t.group, stream);
    case TailKind::kRopeKvWrite:
      return RopeKvWrite(t.rq, t.q_cols, t.k, t.v, rows, t.head_dim, t.half, t.cos_sin, t.neox, t.kv, t.b,
                         t.layer, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

// Off by default until measured on a GPU against the separate launches. Read at every launch (a graph
// is captured once per step shape), so tests can switch it.
bool TailInKernel(TailKind kind) {
  const char* v = std::getenv("FAK_CUDA_TAILS");
  if (kind == TailKind::kNone || v == nullptr || std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") == 0) return true;
  switch (kind) {
    case TailKind::kRmsNorm: return std::strstr(v, "norm") != nullptr;
    case TailKind::kSiluMul: return std::strstr(v, "silu") != nullptr;
    case TailKind::kRopeKvWrite: return std::strstr(v, "rope") != nullptr;
    case TailKind::kNone: break;
  }
  return false;
}

bool TailRunsInKernel(const MatVecTail& t, int64_t n) {
  return n == 1 && TailInKernel(t.kind) && t.counter != nullptr && (t.q == nullptr || t.group == 32);
}

cudaError_t MatVec(const MatVecJob& job, const float* x, Q8Act xq, int64_t n, cudaStream_t stream) {
  if (n <= 0 || job.count <= 0) return cudaSuccess;
  // The K-quants' integer sums need one activation scale per super-block (qblock.cuh).
  if (GroupFor(job.w[0].format) == kKQuantGroup && xq.group != kKQuantGroup) return cudaErrorInvalidValue;
  if (job.tail.kind != TailKind::kNone && !TailRunsInKernel(job.tail, n)) {
    MatVecJob plain = job;
    plain.tail = MatVecTail{};
    if (const cudaError_t e = MatVec(plain, x, xq, n, stream); e != cudaSuccess) return e;
    return LaunchTail(job.tail, n, stream);
  }
  if (MatVecRowsTakes(job, n)) return MatVecRows(job, xq, stream);
  if (job.w[0].format == MatFormat::kQ8_0 && n >= kSmallGemmMinRows && n <= kSmallGemmMaxRows) {
    return SmallQuantGemm(job, xq, n, stream);
  }
  if (ReadsQ8(job.w[0].format) && n >= kGemmMinRows) return QuantGemm(job, xq, n, stream);
  switch (job.w[0].format) {
    case MatFormat::kQ8_0: return Launch<Q8_0>(job, x, xq, n, stream);
    case MatFormat::kQ4_K: return Launch<Q4_K>(job, x, xq, n, stream);
    case MatFormat::kQ6_K: return Launch<Q6_K>(job, x, xq, n, stream);
    case MatFormat::kF16: return Launch<Float<MatFormat::kF16>>(job, x, xq, n, stream);
    case MatFormat::kBF16: return Launch<Float<MatFormat::kBF16>>(job, x, xq, n, stream);
    case MatFormat::kF32: return Launch<Float<MatFormat::kF32>>(job, x, xq, n, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace fak::cuda
