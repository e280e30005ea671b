// Quantized weights times many int8 activation rows on the tensor cores: prefill and large batches.
//
// A block of 128 threads computes a tile of 64 weight rows x 64 activation rows, one segment (8 blocks
// of 32 weights, qblock.cuh) at a time: the segment's weights, unpacked to int8, and the activations go
// to shared memory with their scales; each of the 4 warps then computes 32 x 32 outputs, one
// mma.sync.m16n8k32 (s8 in, exact s32 out) per 32-weight block (Q6_K: two m16n8k16, one per 16-weight
// scale), turns each block's integer dot into its term and adds the terms in qblock.cuh's order, as the
// matrix-vector kernel does. A row's result is therefore the same bits whichever kernel computed it,
// and the batch size only decides which one runs.
//
// Inside a block the 32 bytes of a block are read in an order of our choosing, as long as the weights
// and the activations use the same one (the integer dot does not care): lane q of a quad takes bytes
// [8q, 8q + 8) as the mma's k = 4q..4q+3 and 16+4q..16+4q+3, one 8-byte load for two registers. Rows of
// shared memory are padded to 288 bytes so those loads meet no bank conflicts (272 for Q6_K's 4-byte
// loads).
//
// Napkin math (pp512, 1.5B geometry): 1.3 G multiply-adds per token; each warp-segment is 64 mma (262 k
// multiply-adds) and about 1,500 instructions, most of them the f32 terms: ~700 multiply-adds per SM per
// clock, ~180 T/s on 132 SMs at 1.98 GHz, ~3.7 ms for the 512 tokens' matrices.
#include "backends/cuda/kernels.h"
#include "backends/cuda/qblock.cuh"

namespace fak::cuda {
namespace {

constexpr int kTile = 64;  // weight rows and activation rows per block
constexpr int kThreads = 128;
constexpr int kSegWeights = kBlocksPerSegment * 32;

__device__ __forceinline__ void Mma32(int* c, int a0, int a1, int a2, int a3, int b0, int b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void Mma16(int* c, int a0, int a1, int b0) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

// One segment of 64 activation rows: int8 values, block scales, and (for Q4_K's mins) block sums.
template <int kStride>
struct TileX {
  int8_t q[kTile][kStride];
  float d[kTile][kBlocksPerSegment + 1];  // + 1: conflict-free reads of 4 rows at a stride of 2
  int sum[kTile][kBlocksPerSegment + 1];
};

template <int kStride, bool kSums>
__device__ __forceinline__ void LoadX(TileX<kStride>& s, Q8Act x, int64_t cols, int64_t n, int64_t r0,
                                      int64_t seg, int tid) {
  const int64_t nb = cols / 32;
  for (int c = tid; c < kTile * 16; c += kThreads) {  // 16 chunks of 16 bytes per row
    const int row = c >> 4, col = c & 15;
    const int64_t r = r0 + row, b = seg * kBlocksPerSegment + (col >> 1);
    int4 v = make_int4(0, 0, 0, 0);
    if (r < n && b < nb) v = Load16(x.q + r * cols + seg * kSegWeights + col * 16);
    *reinterpret_cast<int4*>(&s.q[row][col * 16]) = v;
    if constexpr (kSums) {
      // Threads c and c ^ 1 hold the two halves of one block (every lane of the warp is here).
      int sum = Sum16(v);
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      if ((col & 1) == 0) s.sum[row][col >> 1] = sum;
    }
  }
  for (int c = tid; c < kTile * kBlocksPerSegment; c += kThreads) {
    const int row = c >> 3, k = c & 7;
    const int64_t r = r0 + row, b = seg * kBlocksPerSegment + k;
    s.d[row][k] = r < n && b < nb ? x.d[r * nb + b] : 0.0f;
  }
}

// Per block of the segment, the 32 x 32 outputs of a warp (rows 32 wm .., activation rows 32 wn ..)
// with one m16n8k32 each, the terms by F::Term, the segment's tree added to `piece`.
template <class F>
__device__ __forceinline__ void ComputeK32(const typename F::Smem& s, const TileX<F::kStride>& x, int wm,
                                           int wn, int lane, int nvalid, float (&piece)[2][4][4]) {
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = 32 * wm + 16 * i + g;
    int2 alo[kBlocksPerSegment], ahi[kBlocksPerSegment];
#pragma unroll
    for (int b = 0; b < kBlocksPerSegment; ++b) {
      alo[b] = *reinterpret_cast<const int2*>(&s.w[row][32 * b + 8 * q]);
      ahi[b] = *reinterpret_cast<const int2*>(&s.w[row + 8][32 * b + 8 * q]);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int tok = 32 * wn + 8 * j + g, tq = 32 * wn + 8 * j + 2 * q;
      float t[4][kBlocksPerSegment];
#pragma unroll
      for (int b = 0; b < kBlocksPerSegment; ++b) {
        const int2 bv = *reinterpret_cast<const int2*>(&x.q[tok][32 * b + 8 * q]);
        int c[4] = {0, 0, 0, 0};
        Mma32(c, alo[b].x, ahi[b].x, alo[b].y, ahi[b].y, bv.x, bv.y);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          t[e][b] = b < nvalid ? F::Term(s, x, row + 8 * (e >> 1), tq + (e & 1), b, c[e]) : 0.0f;
        }
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) piece[i][j][e] = __fadd_rn(piece[i][j][e], Tree8(t[e]));
    }
  }
}

struct Q8_0Gemm {
  static constexpr int kStride = 288;
  static constexpr bool kSums = false;
  struct Smem {
    int8_t w[kTile][kStride];
    float dw[kTile][kBlocksPerSegment + 1];
  };
  static __device__ __forceinline__ void LoadW(Smem& s, const DeviceMatrix& w, int64_t o0, int64_t seg,
                                               int tid) {
    const int64_t nb = w.cols / 32;
    for (int c = tid; c < kTile * 16; c += kThreads) {
      const int row = c >> 4, col = c & 15;
      const int64_t o = o0 + row, b = seg * kBlocksPerSegment + (col >> 1);
      int4 v = make_int4(0, 0, 0, 0);
      if (o < w.rows && b < nb) v = Load16(w.q + o * w.cols + seg * kSegWeights + col * 16);
      *reinterpret_cast<int4*>(&s.w[row][col * 16]) = v;
    }
    for (int c = tid; c < kTile * kBlocksPerSegment; c += kThreads) {
      const int row = c >> 3, k = c & 7;
      const int64_t o = o0 + row, b = seg * kBlocksPerSegment + k;
      s.dw[row][k] = o < w.rows && b < nb ? HalfBits(w.d[o * nb + b]) : 0.0f;
    }
  }
  static __device__ __forceinline__ float Term(const Smem& s, const TileX<kStride>& x, int row, int tok,
                                               int b, int isum) {
    return Q8_0Term(isum, s.dw[row][b], x.d[tok][b]);
  }
  static __device__ __forceinline__ void Compute(const Smem& s, const TileX<kStride>& x, int wm, int wn,
                                                 int lane, int nvalid, float (&piece)[2][4][4]) {
    ComputeK32<Q8_0Gemm>(s, x, wm, wn, lane, nvalid, piece);
  }
};

// Q4_K: a segment is one 144-byte super-block per row; its nibbles are unpacked to int8 (sub-block s
// at bytes 32 s ..), its scales and mins decoded once per row.
struct Q4_KGemm {
  static constexpr int kStride = 288;
  static constexpr bool kSums = true;
  struct Smem {
    int8_t w[kTile][kStride];
    float d[kTile], dmin[kTile];
    uint8_t sc[kTile][kBlocksPerSegment], m[kTile][kBlocksPerSegment];
  };
  static __device__ __forceinline__ void LoadW(Smem& s, const DeviceMatrix& w, int64_t o0, int64_t seg,
                                               int tid) {
    const int64_t nsb = w.cols / 256;
    for (int c = tid; c < kTile * 9; c += kThreads) {  // the header and 8 chunks of nibbles per row
      const int row = c / 9, part = c % 9;
      const int64_t o = o0 + row;
      const bool ok = o < w.rows;
      const uint8_t* blk = w.q + (o * nsb + seg) * 144;
      if (part == 0) {
        const int4 head = ok ? Load16(blk) : make_int4(0, 0, 0, 0);
        s.d[row] = HalfBits(static_cast<uint16_t>(head.x & 0xFFFF));
        s.dmin[row] = HalfBits(static_cast<uint16_t>(static_cast<unsigned>(head.x) >> 16));
        const uint8_t* hb = reinterpret_cast<const uint8_t*>(&head) + 4;
#pragma unroll
        for (int k = 0; k < kBlocksPerSegment; ++k) {
          int sc, m;
          Q4_KScaleMin(hb, k, &sc, &m);
          s.sc[row][k] = static_cast<uint8_t>(sc);
          s.m[row][k] = static_cast<uint8_t>(m);
        }
      } else {
        const int4 qs = ok ? Load16(blk + 16 * part) : make_int4(0, 0, 0, 0);  // bytes 16 (part - 1) of qs
        const int j = (part - 1) >> 1, h = (part - 1) & 1;
        *reinterpret_cast<int4*>(&s.w[row][64 * j + 16 * h]) = And(qs, 0x0F0F0F0F);
        *reinterpret_cast<int4*>(&s.w[row][64 * j + 32 + 16 * h]) = And(Shr(qs, 4), 0x0F0F0F0F);
      }
    }
  }
  static __device__ __forceinline__ float Term(const Smem& s, const TileX<kStride>& x, int row, int tok,
                                               int b, int isum) {
    return Q4_KTerm(isum, x.sum[tok][b], s.sc[row][b], s.m[row][b], s.d[row], s.dmin[row], x.d[tok][b]);
  }
  static __device__ __forceinline__ void Compute(const Smem& s, const TileX<kStride>& x, int wm, int wn,
                                                 int lane, int nvalid, float (&piece)[2][4][4]) {
    ComputeK32<Q4_KGemm>(s, x, wm, wn, lane, nvalid, piece);
  }
};

// Q6_K: a segment is one 208-byte super-block per row (weights.h), unpacked to int8 values -32..31 in
// weight order; each 32-weight block is two m16n8k16, one per 16-weight scale.
struct Q6_KGemm {
  static constexpr int kStride = 272;
  static constexpr bool kSums = false;
  struct Smem {
    int8_t w[kTile][kStride];
    int8_t sc[kTile][16];
    float d[kTile];
  };
  static __device__ __forceinline__ void LoadW(Smem& s, const DeviceMatrix& w, int64_t o0, int64_t seg,
                                               int tid) {
    const int64_t nsb = w.cols / 256;
    for (int c = tid; c < kTile * 5; c += kThreads) {  // 4 runs of 16 weights x 4, and the scales, per row
      const int row = c / 5, part = c % 5;
      const int64_t o = o0 + row;
      const bool ok = o < w.rows;
      const uint8_t* blk = w.q + (o * nsb + seg) * 208;
      if (part == 4) {
        *reinterpret_cast<int4*>(&s.sc[row][0]) = ok ? Load16(blk + 192) : make_int4(0, 0, 0, 0);
        s.d[row] = ok ? HalfBits(w.d[o * nsb + seg]) : 0.0f;
        continue;
      }
      const int n = part >> 1, l0 = 16 * (part & 1);
      const int4 zero = make_int4(0, 0, 0, 0);
      const int4 qa = ok ? Load16(blk + 64 * n + l0) : zero, qb = ok ? Load16(blk + 64 * n + 32 + l0) : zero;
      const int4 qh = ok ? Load16(blk + 128 + 32 * n + l0) : zero;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int4 lo = And(Shr(k & 1 ? qb : qa, k >= 2 ? 4 : 0), 0x0F0F0F0F);
        const int4 v = ok ? Q6Values(lo, And(Shr(qh, 2 * k), 0x03030303)) : zero;
        *reinterpret_cast<int4*>(&s.w[row][128 * n + 32 * k + l0]) = v;
      }
    }
  }
  static __device__ __forceinline__ void Compute(const Smem& s, const TileX<kStride>& x, int wm, int wn,
                                                 int lane, int nvalid, float (&piece)[2][4][4]) {
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = 32 * wm + 16 * i + g;
      int a[kBlocksPerSegment][4];
#pragma unroll
      for (int b = 0; b < kBlocksPerSegment; ++b) {
        a[b][0] = *reinterpret_cast<const int*>(&s.w[row][32 * b + 4 * q]);
        a[b][1] = *reinterpret_cast<const int*>(&s.w[row + 8][32 * b + 4 * q]);
        a[b][2] = *reinterpret_cast<const int*>(&s.w[row][32 * b + 16 + 4 * q]);
        a[b][3] = *reinterpret_cast<const int*>(&s.w[row + 8][32 * b + 16 + 4 * q]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int tok = 32 * wn + 8 * j + g, tq = 32 * wn + 8 * j + 2 * q;
        float t[4][kBlocksPerSegment];
#pragma unroll
        for (int b = 0; b < kBlocksPerSegment; ++b) {
          const int b0 = *reinterpret_cast<const int*>(&x.q[tok][32 * b + 4 * q]);
          const int b1 = *reinterpret_cast<const int*>(&x.q[tok][32 * b + 16 + 4 * q]);
          int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
          Mma16(lo, a[b][0], a[b][1], b0);
          Mma16(hi, a[b][2], a[b][3], b1);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = row + 8 * (e >> 1), tk = tq + (e & 1);
            t[e][b] = b < nvalid
                          ? Q6_KTerm(lo[e], hi[e], s.sc[r][2 * b], s.sc[r][2 * b + 1], s.d[r], x.d[tk][b])
                          : 0.0f;
          }
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) piece[i][j][e] = __fadd_rn(piece[i][j][e], Tree8(t[e]));
      }
    }
  }
};

// Ends piece p: the row's sum so far is the piece's sum (p = 0) or itself plus it.
__device__ __forceinline__ void ClosePiece(int p, float (&total)[2][4][4], float (&piece)[2][4][4]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        total[i][j][e] = p == 0 ? piece[i][j][e] : __fadd_rn(total[i][j][e], piece[i][j][e]);
        piece[i][j][e] = 0.0f;
      }
    }
  }
}

// Grid: x over the 64-row tiles of the job's matrices in order, y over 64-row tiles of the activations.
template <class F>
__global__ void __launch_bounds__(kThreads) GemmKernel(MatVecJob job, Q8Act xq, int64_t n) {
  __shared__ typename F::Smem sw;
  __shared__ TileX<F::kStride> sx;
  int k = 0;
  int64_t first = 0, tiles = (job.w[0].rows + kTile - 1) / kTile;
  while (k + 1 < job.count && blockIdx.x >= first + tiles) {
    first += tiles;
    ++k;
    tiles = (job.w[k].rows + kTile - 1) / kTile;
  }
  const DeviceMatrix& w = job.w[k];
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) - first) * kTile;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 1, wn = warp & 1;
  const int64_t nb = w.cols / 32, ng = QuantSegments(w.cols);
  const int pieces = QuantPieces(w.cols);

  float total[2][4][4], piece[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) total[i][j][e] = piece[i][j][e] = 0.0f;
    }
  }
  int p = 0;
  int64_t p_end = PieceBegin(ng, pieces, 1);
  for (int64_t seg = 0; seg < ng; ++seg) {
    while (seg >= p_end) {
      ClosePiece(p, total, piece);
      ++p;
      p_end = PieceBegin(ng, pieces, p + 1);
    }
    __syncthreads();  // the previous segment's reads of shared memory are done
    F::LoadW(sw, w, o0, seg, tid);
    LoadX<F::kStride, F::kSums>(sx, xq, w.cols, n, r0, seg, tid);
    __syncthreads();
    const int nvalid = static_cast<int>(
        nb - seg * kBlocksPerSegment < kBlocksPerSegment ? nb - seg * kBlocksPerSegment : kBlocksPerSegment);
    F::Compute(sw, sx, wm, wn, lane, nvalid, piece);
  }
  for (; p < pieces; ++p) ClosePiece(p, total, piece);

  const MatVecOut out = job.out[k];
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t o = o0 + 32 * wm + 16 * i + g + 8 * (e >> 1),
                      r = r0 + 32 * wn + 8 * j + 2 * q + (e & 1);
        if (o < w.rows && r < n) StoreResult(out, r, o, total[i][j][e]);
      }
    }
  }
}

template <class F>
cudaError_t LaunchGemm(const MatVecJob& job, Q8Act xq, int64_t n, cudaStream_t stream) {
  int64_t tiles = 0;
  for (int k = 0; k < job.count; ++k) tiles += (job.w[k].rows + kTile - 1) / kTile;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>((n + kTile - 1) / kTile));
  GemmKernel<F><<<grid, kThreads, 0, stream>>>(job, xq, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t QuantGemm(const MatVecJob& job, Q8Act xq, int64_t n, cudaStream_t stream) {
  if (n <= 0 || job.count <= 0) return cudaSuccess;
  switch (job.w[0].format) {
    case MatFormat::kQ8_0: return LaunchGemm<Q8_0Gemm>(job, xq, n, stream);
    case MatFormat::kQ4_K: return LaunchGemm<Q4_KGemm>(job, xq, n, stream);
    case MatFormat::kQ6_K: return LaunchGemm<Q6_KGemm>(job, xq, n, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace fak::cuda
