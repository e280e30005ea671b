// The one-row product of the quantized formats (decode): a warp per whole row, two blocks per lane.
//
// Measured on an H100 (fak bench kernels --backend cuda, 2026-12-06) the kernel of matvec.cu was
// bound by its instruction issue, not by memory: for the 27B geometry's gate/up product at Q4_K, 76 M
// warp instructions (issue slots 80% busy) against 100 MB of weights, 1.1 TB/s of the 3.0 the copy
// reaches; each warp summed a quarter of a row (five 256-weight segments) and paid the row's fixed costs
// (finding its matrix, the prefetch, the exchange between the block's warps, the store) for it. Here:
//   - a warp takes whole rows, w, w + W, w + 2W, ... (W warps in the grid, as many blocks as the GPU
//     holds at once), round after round of eight segments (lane l on blocks 2 (l % 4) and
//     2 (l % 4) + 1 of segment l / 4: one Q4_K header and one 32-byte run of nibbles serve both), with
//     the next round's weights fetched into registers before the current one is computed and the
//     warp's next row prefetched to L2 as a row begins;
//   - the activation row is staged once per block in shared memory with each 32-block's sum (Q4_K's
//     term needs it) computed there, instead of by every lane of every row;
//   - index arithmetic is 32-bit (a 64-bit division is a long call).
// A row's terms are qblock.cuh's (the same Term functions on the same bytes) and are added in its order
// (the segment's tree: the lane's pair, then a butterfly over the 4 lanes; segments in order within
// each piece from +0; the pieces in order), so the bits are those of matvec.cu's kernels and the GEMM's.
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>

#include "backends/cuda/kernels.h"
#include "backends/cuda/pdl.cuh"
#include "backends/cuda/qblock.cuh"

namespace fak::cuda {
namespace {

constexpr int kWarps = 4;

// The activation row in shared memory: q (cols int8), d (nb block scales), s (nb block sums, exact).
struct Staged {
  const int8_t* q;
  const float* d;
  const float* s;
};

__device__ __forceinline__ int4 Shared16(const int8_t* p) { return *reinterpret_cast<const int4*>(p); }

// Byte i (0..11) of a Q4_K super-block's packed scales, which are bytes 4..15 of its header h.
__device__ __forceinline__ int ScaleByte(const int4& h, int i) {
  const unsigned word = static_cast<unsigned>(i < 4 ? h.y : i < 8 ? h.z : h.w);
  return static_cast<int>((word >> (8 * (i & 3))) & 0xFFu);
}

// Each format: Raw, what a lane loads for blocks b = 8g + 2j and b + 1 of row o; Fetch issues the loads
// (blocks past the row's end are not read); Terms computes the two terms (+0 past the end).
struct RowsQ8_0 {
  struct Raw {
    int4 a0, a1, a2, a3;
    uint16_t d0, d1;
  };
  static __device__ __forceinline__ Raw Fetch(const DeviceMatrix& w, int o, int b, int nb) {
    Raw r{};
    const uint8_t* wp = w.q + static_cast<int64_t>(o) * (nb * 32) + b * 32;
    const uint16_t* dp = w.d + static_cast<int64_t>(o) * nb + b;
    if (b < nb) r.a0 = Load16(wp), r.a1 = Load16(wp + 16), r.d0 = __ldg(dp);
    if (b + 1 < nb) r.a2 = Load16(wp + 32), r.a3 = Load16(wp + 48), r.d1 = __ldg(dp + 1);
    return r;
  }
  static __device__ __forceinline__ void Terms(const Raw& r, const Staged& x, int b, int nb, float* t0,
                                               float* t1) {
    const int8_t* xp = x.q + b * 32;
    if (b < nb) {
      *t0 = Q8_0Term(Dot16(r.a0, Shared16(xp)) + Dot16(r.a1, Shared16(xp + 16)) + kExactBias, HalfBits(r.d0),
                     x.d[b]);
    }
    if (b + 1 < nb) {
      *t1 = Q8_0Term(Dot16(r.a2, Shared16(xp + 32)) + Dot16(r.a3, Shared16(xp + 48)) + kExactBias,
                     HalfBits(r.d1), x.d[b + 1]);
    }
  }
  static __device__ __forceinline__ int64_t RowBytes(int nb) { return nb * 32; }
  static __device__ __forceinline__ int64_t ScaleBytes(int nb) { return nb * 2; }
};

// Q4_K (cols a multiple of 256): blocks 2j and 2j + 1 of a super-block are the low and high nibbles of
// qs[32j .. 32j + 32].
struct RowsQ4_K {
  struct Raw {
    int4 head, q0, q1;
  };
  static __device__ __forceinline__ Raw Fetch(const DeviceMatrix& w, int o, int b, int nb) {
    const uint8_t* blk = w.q + (static_cast<int64_t>(o) * (nb / 8) + (b >> 3)) * 144;
    const int j = (b & 7) >> 1;
    return Raw{Load16(blk), Load16(blk + 16 + 32 * j), Load16(blk + 32 + 32 * j)};
  }
  static __device__ __forceinline__ void Terms(const Raw& r, const Staged& x, int b, int, float* t0,
                                               float* t1) {
    const float d = HalfBits(static_cast<uint16_t>(r.head.x & 0xFFFF));
    const float dmin = HalfBits(static_cast<uint16_t>(static_cast<unsigned>(r.head.x) >> 16));
    const int8_t* xp = x.q + b * 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int s = (b & 7) + h;  // sub-block: the low (h = 0) or high nibbles
      int sc, m;
      if (s < 4) {
        sc = ScaleByte(r.head, s) & 63;
        m = ScaleByte(r.head, s + 4) & 63;
      } else {
        sc = (ScaleByte(r.head, s + 4) & 0xF) | ((ScaleByte(r.head, s - 4) >> 6) << 4);
        m = (ScaleByte(r.head, s + 4) >> 4) | ((ScaleByte(r.head, s) >> 6) << 4);
      }
      const int4 n0 = And(Shr(r.q0, 4 * h), 0x0F0F0F0F), n1 = And(Shr(r.q1, 4 * h), 0x0F0F0F0F);
      const float t = Q4_KTerm(
          Dot16(n0, Shared16(xp + 32 * h)) + Dot16(n1, Shared16(xp + 32 * h + 16)) + kExactBias, x.s[b + h],
          __fmul_rn(d, static_cast<float>(sc)), __fmul_rn(dmin, static_cast<float>(m)), x.d[b + h]);
      *(h == 0 ? t0 : t1) = t;
    }
  }
  static __device__ __forceinline__ int64_t RowBytes(int nb) { return nb / 8 * 144; }
  static __device__ __forceinline__ int64_t ScaleBytes(int) { return 0; }
};

// Q6_K repacked (weights.h; cols a multiple of 256): block s = 4n + k of a super-block has its low bits in
// ql[64n + 32 (k % 2) ..] (low nibbles for k < 2, high for k >= 2), its high bits at bit 2k of qh[32n ..]
// and its scales at scales[2s], scales[2s + 1]; blocks 2j and 2j + 1 share n, the nibble and qh.
struct RowsQ6_K {
  struct Raw {
    int4 la0, la1, lb0, lb1, h0, h1;
    uint32_t sc;
    uint16_t d;
  };
  static __device__ __forceinline__ Raw Fetch(const DeviceMatrix& w, int o, int b, int nb) {
    const int64_t sb = static_cast<int64_t>(o) * (nb / 8) + (b >> 3);
    const int s = b & 7, n = s >> 2;
    const uint8_t* blk = w.q + sb * 208;
    const uint8_t* ql = blk + 64 * n;
    const uint8_t* qh = blk + 128 + 32 * n;
    return Raw{Load16(ql),
               Load16(ql + 16),
               Load16(ql + 32),
               Load16(ql + 48),
               Load16(qh),
               Load16(qh + 16),
               __ldg(reinterpret_cast<const uint32_t*>(blk + 192 + 2 * s)),
               __ldg(w.d + sb)};
  }
  static __device__ __forceinline__ void Terms(const Raw& r, const Staged& x, int b, int, float* t0,
                                               float* t1) {
    const int s = b & 7, k = s & 3, shift = k >= 2 ? 4 : 0;
    const float d = HalfBits(r.d);
    const int8_t* xp = x.q + b * 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int4 l0 = h == 0 ? r.la0 : r.lb0, l1 = h == 0 ? r.la1 : r.lb1;
      const int4 q0 = Q6Values(And(Shr(l0, shift), 0x0F0F0F0F), And(Shr(r.h0, 2 * (k + h)), 0x03030303));
      const int4 q1 = Q6Values(And(Shr(l1, shift), 0x0F0F0F0F), And(Shr(r.h1, 2 * (k + h)), 0x03030303));
      const auto lo = static_cast<int8_t>((r.sc >> (16 * h)) & 0xFF);
      const auto hi = static_cast<int8_t>((r.sc >> (16 * h + 8)) & 0xFF);
      const float t = Q6_KTerm(
          Dot16(q0, Shared16(xp + 32 * h)) + kExactBias, Dot16(q1, Shared16(xp + 32 * h + 16)) + kExactBias,
          __fmul_rn(d, static_cast<float>(lo)), __fmul_rn(d, static_cast<float>(hi)), x.d[b + h]);
      *(h == 0 ? t0 : t1) = t;
    }
  }
  static __device__ __forceinline__ int64_t RowBytes(int nb) { return nb / 8 * 208; }
  static __device__ __forceinline__ int64_t ScaleBytes(int nb) { return nb / 8 * 2; }
};

// Bytes of shared memory for an activation row of cols: the int8 values (rounded up to 16) and two
// floats per block.
__host__ __device__ constexpr int StagedBytes(int cols) { return (cols + 15) / 16 * 16 + cols / 32 * 8; }

template <class F>
__global__ void __launch_bounds__(kWarps * 32) MatVecRowsKernel(MatVecJob job, Q8Act xq, int total_rows) {
  extern __shared__ __align__(16) uint8_t staged_bytes[];
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int cols = static_cast<int>(job.w[0].cols), nb = cols / 32, ng = (nb + 7) / 8;
  const int rounds = (ng + 7) / 8, tw = static_cast<int>(gridDim.x) * kWarps;
  int row = static_cast<int>(blockIdx.x) * kWarps + static_cast<int>(threadIdx.x >> 5);

  // Row `row` of the job: matrix k, its row o (row < total_rows).
  auto locate = [&](int r, int* k, int* o) {
    int kk = 0;
    while (kk + 1 < job.count && r >= job.w[kk].rows) r -= static_cast<int>(job.w[kk++].rows);
    *k = kk;
    *o = r;
  };
  auto prefetch = [&](int r) {  // weights no kernel writes: may run before the wait
    if (r >= total_rows) return;
    int k, o;
    locate(r, &k, &o);
    const int64_t bytes = F::RowBytes(nb), sbytes = F::ScaleBytes(nb);
    const uint8_t* p = job.w[k].q + o * bytes;
    for (int off = lane * 128; off < bytes; off += 32 * 128) PrefetchL2(p + off);
    const auto* ps = reinterpret_cast<const uint8_t*>(job.w[k].d) + o * sbytes;
    for (int off = lane * 128; off < sbytes; off += 32 * 128) PrefetchL2(ps + off);
  };
  prefetch(row);
  AfterPrevious();

  // The activations, once per block.
  auto* sq = reinterpret_cast<int8_t*>(staged_bytes);
  auto* sd = reinterpret_cast<float*>(staged_bytes + (cols + 15) / 16 * 16);
  float* ss = sd + nb;
  for (int i = static_cast<int>(threadIdx.x) * 16; i < cols; i += kWarps * 32 * 16)
    *reinterpret_cast<int4*>(sq + i) = Load16(xq.q + i);
  for (int b = static_cast<int>(threadIdx.x); b < nb; b += kWarps * 32) {
    sd[b] = __ldg(xq.d + b);
    ss[b] = ExactFloat(Sum16(Load16(xq.q + 32 * b)) + Sum16(Load16(xq.q + 32 * b + 16)));
  }
  __syncthreads();
  if (row >= total_rows) return;
  const Staged x{sq, sd, ss};

  // Where piece p ends (the first segment of the next, qblock.cuh); past the last piece, never.
  const int pieces = QuantPieces(cols);
  auto piece_end = [&](int p) { return p + 1 < pieces ? ng * (p + 1) / pieces : INT_MAX; };

  const int j2 = 2 * (lane & 3), gl = lane >> 2;
  int k, o;
  locate(row, &k, &o);
  int r = 0;
  typename F::Raw cur{};
  if (gl < ng) cur = F::Fetch(job.w[k], o, 8 * gl + j2, nb);
  float acc = 0.0f, total = 0.0f;
  int p = 0, end = piece_end(0);
  while (true) {
    // The next round (of this row or the warp's next), fetched while this one computes.
    int nrow = row, nr = r + 1, nk = k, no = o;
    if (nr == rounds) {
      nr = 0;
      nrow += tw;
      if (nrow < total_rows) locate(nrow, &nk, &no);
    }
    if (r == 0) prefetch(row + tw);
    const int ng_next = 8 * nr + gl;
    typename F::Raw nxt{};
    if (nrow < total_rows && ng_next < ng) nxt = F::Fetch(job.w[nk], no, 8 * ng_next + j2, nb);

    const int g = 8 * r + gl;
    float t0 = 0.0f, t1 = 0.0f;
    if (g < ng) F::Terms(cur, x, 8 * g + j2, nb, &t0, &t1);
    float v = __fadd_rn(t0, t1);
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const float seg = __shfl_sync(0xffffffffu, v, 4 * s);
      const int gs = 8 * r + s;
      if (gs >= ng) break;
      if (gs == end) {
        total = p == 0 ? acc : __fadd_rn(total, acc);
        acc = 0.0f;
        end = piece_end(++p);
      }
      acc = __fadd_rn(acc, seg);
    }
    if (r + 1 == rounds) {
      total = p == 0 ? acc : __fadd_rn(total, acc);
      if (lane == 0) StoreResult(job.out[k], 0, o, total);
      if (nrow >= total_rows) break;
      acc = 0.0f;
      total = 0.0f;
      p = 0;
      end = piece_end(0);
    }
    row = nrow;
    r = nr;
    k = nk;
    o = no;
    cur = nxt;
  }
}

// Blocks of the format's kernel one multiprocessor holds with the activations of `cols` staged: asked of
// the occupancy API once per width (MatVecRowsTakes and the launch both need it).
template <class F>
int BlocksPerSm(int cols) {
  static std::mutex mu;
  static std::map<int, int> known;
  const std::lock_guard<std::mutex> lock(mu);
  const auto it = known.find(cols);
  if (it != known.end()) return it->second;
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, MatVecRowsKernel<F>, kWarps * 32,
                                                    StagedBytes(cols)) != cudaSuccess) {
    cudaGetLastError();
    per_sm = 1;
  }
  return known[cols] = std::max(1, per_sm);
}

// Resident warps of the format's kernel for rows of `cols`.
template <class F>
int64_t ResidentWarps(int cols) {
  return int64_t{kWarps} * BlocksPerSm<F>(cols) * std::max(1, MultiprocessorCount());
}

template <class F>
cudaError_t LaunchRows(const MatVecJob& job, Q8Act xq, cudaStream_t s) {
  const int cols = static_cast<int>(job.w[0].cols);
  int64_t rows = 0;
  for (int k = 0; k < job.count; ++k) rows += job.w[k].rows;
  const int64_t blocks = std::min((rows + kWarps - 1) / kWarps, ResidentWarps<F>(cols) / kWarps);
  return Launch(MatVecRowsKernel<F>, dim3(static_cast<unsigned>(blocks)), kWarps * 32, StagedBytes(cols), s,
                job, xq, static_cast<int>(rows));
}

}  // namespace

// Where it pays, measured on an H200 (fak bench kernels --backend cuda, 2026-12-06): rows of at least one
// full round (2,048 columns), and at least two rows per resident warp. With fewer rows a warp's rounds
// run one after another with one round in flight, where the previous kernel has four warps on a row
// (7B and 27B down projections: 1.24 against 1.49 and 1.60 TB/s at Q4_K); at 1,536 columns a quarter of
// the lanes idle (1.5B gate/up at Q8_0: 2.18 against 2.35). Taken: the 7B gate/up (1.81 against 1.75
// at Q4_K, 3.08 against 2.83 at Q8_0), the 27B gate/up, attention q and Gated-DeltaNet input (Q4_K
// 1.67, 1.35, 1.44 against 1.12, 1.09, 1.08).
bool MatVecRowsTakes(const MatVecJob& job, int64_t n) {
  if (n != 1 || job.tail.kind != TailKind::kNone || !ReadsQ8(job.w[0].format)) return false;
  const char* v = std::getenv("FAK_CUDA_MATVEC_ROWS");
  if (v != nullptr && v[0] == '0') return false;
  const bool always = v != nullptr && v[0] == '1';  // every shape it can take (tests, comparisons)
  int64_t rows = 0;
  for (int k = 0; k < job.count; ++k) rows += job.w[k].rows;
  const int64_t cols = job.w[0].cols;
  if (cols > kMatVecRowsMaxCols || rows >= (int64_t{1} << 30) ||
      (job.w[0].format == MatFormat::kQ8_0 ? cols % 32 != 0 : cols % 256 != 0)) {
    return false;
  }
  if (always) return true;
  if (cols < 2048) return false;
  const int c = static_cast<int>(cols);
  switch (job.w[0].format) {
    case MatFormat::kQ8_0: return rows >= 2 * ResidentWarps<RowsQ8_0>(c);
    case MatFormat::kQ4_K: return rows >= 2 * ResidentWarps<RowsQ4_K>(c);
    case MatFormat::kQ6_K: return rows >= 2 * ResidentWarps<RowsQ6_K>(c);
    default: return false;
  }
}

cudaError_t MatVecRows(const MatVecJob& job, Q8Act xq, cudaStream_t stream) {
  switch (job.w[0].format) {
    case MatFormat::kQ8_0: return LaunchRows<RowsQ8_0>(job, xq, stream);
    case MatFormat::kQ4_K: return LaunchRows<RowsQ4_K>(job, xq, stream);
    case MatFormat::kQ6_K: return LaunchRows<RowsQ6_K>(job, xq, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace fak::cuda
