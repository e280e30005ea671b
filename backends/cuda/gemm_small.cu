// Q8_0 weights times a small batch of int8 activation rows (batched decode, 5 to 32 rows) on the
// tensor cores.
//
// The large-batch GEMM (gemm.cu) gives a block a 64 x 64 tile and walks a row's segments one after
// another: at 32 rows a 1536-wide matrix is 24-32 blocks on 132 multiprocessors, each a long serial
// chain (37 us per matrix). Here a block takes 16 weight rows and 8 * NT activation rows (NT = 1 or 2
// n-tiles), and its warps take the rows' segments in turn (warp w: segments w, w + W, ...), each
// computing its segment's sums (qblock.cuh step 1) with one m16n8k32 per 32-weight block and n-tile.
// The first NT warps then add the round's segments to the piece and piece sums in order (steps 2 and
// 3) from shared memory. The bits are those of the matrix-vector kernel and the GEMM, so the batch size
// still only decides which kernel runs.
//
// The operands come straight from global memory, without staging: a block's integer dot is the same
// whatever order its 32 products are summed in, so lane (g, q) loads the 8 consecutive bytes 8q..8q+7
// of its weight rows g and g + 8 and of its activation row g, and hands bytes 8q..8q+3 to the mma as
// k = 4q..4q+3 and bytes 8q+4..8q+7 as k = 16+4q..16+4q+3: one permutation of k on both sides. The
// segment's scales come 16 bytes at a time where rows allow. Before it waits for the previous kernel,
// each warp prefetches its weight bytes and scales into L2.
//
// Measured (H200, 1.5B Q8_0, 32 rows, ncu): the gate/up product takes ~46 us (0.63 TB/s of weights)
// whether a block has 1 or 2 n-tiles, 64 or 128 registers per thread, 16 or 64 weight rows: about 20
// instructions per block term and the loads' latency bound it, not the bandwidth. docs/bench/gpu.md.
#include <algorithm>

#include "backends/cuda/kernels.h"
#include "backends/cuda/pdl.cuh"
#include "backends/cuda/qblock.cuh"

namespace fak::cuda {
namespace {

constexpr int kMaxSlots = 8;  // warps per 16 weight rows: segments computed at once
// Warps per block when the grid has blocks enough to fill the GPU four times over: each warp then takes
// more segments one after another (fewer blocks, rounds and barriers).
constexpr int kBusySlots = 3;

// Loads of data no kernel writes while this one runs (the read-only path), kept in the order written:
// measured this way. (With a loop over several row groups per block, tried and taken out, plain loads
// were hoisted out of the loop into over 200 registers.)
__device__ __forceinline__ int2 Load8(const void* p) {
  int2 v;
  asm volatile("ld.global.nc.v2.s32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ float LoadF(const float* p) {
  float v;
  asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
// 16 bytes (the same instruction for integer and float data; qblock.cuh's Load16 is the plain form).
__device__ __forceinline__ uint4 Load16Nc(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ float4 Load16F(const float* p) {
  const uint4 v = Load16Nc(p);
  return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w));
}
__device__ __forceinline__ uint16_t LoadH(const uint16_t* p) {
  uint16_t v;
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// The addresses one lane reads: its two weight rows (g and g + 8 of the warp's 16), and per n-tile j
// its activation row (8j + g, for the B operand) and the two whose scales its outputs need (8j + 2q
// and 8j + 2q + 1), as offsets into the activations (a batch of at most kSmallGemmMaxRows rows fits in 32
// bits).
template <int NT>
struct LaneRows {
  const uint8_t* wa;
  const uint8_t* wb;
  const uint16_t* da;
  const uint16_t* db;
  int xq[NT];
  int xd[NT][2];
};

// The lane's addresses inside one segment: its weight rows, their scales, and per n-tile its activation
// row and the two scale rows, each at the segment's first block; block b is then a constant offset.
template <int NT>
struct SegmentRows {
  const uint8_t* wa;
  const uint8_t* wb;
  const uint16_t* da;
  const uint16_t* db;
  const int8_t* xq[NT];
  const float* xd[NT][2];
};

// The scales of a segment's 8 blocks: the weight rows' (f16, two per word) and the activation rows'.
template <int NT>
struct SegmentScales {
  uint32_t dw[2][4];
  float dx[NT][2][8];
};

// The scales, 16 bytes at a time when the segment is whole and its rows' scales start 16-byte aligned
// (kVec), else one by one (blocks past the row's end repeat its last block).
template <int NT, bool kVec>
__device__ __forceinline__ void LoadScales(const SegmentRows<NT>& sr, int left, SegmentScales<NT>& sc) {
  if constexpr (kVec) {
    const uint4 a = Load16Nc(sr.da), b = Load16Nc(sr.db);
    sc.dw[0][0] = a.x, sc.dw[0][1] = a.y, sc.dw[0][2] = a.z, sc.dw[0][3] = a.w;
    sc.dw[1][0] = b.x, sc.dw[1][1] = b.y, sc.dw[1][2] = b.z, sc.dw[1][3] = b.w;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float4 lo = Load16F(sr.xd[j][h]), hi = Load16F(sr.xd[j][h] + 4);
        const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int b = 0; b < 8; ++b) sc.dx[j][h][b] = v[b];
      }
    }
  } else {
#pragma unroll
    for (int b = 0; b < 8; b += 2) {
      const int b0 = b < left ? b : left - 1, b1 = b + 1 < left ? b + 1 : left - 1;
      sc.dw[0][b / 2] = LoadH(sr.da + b0) | (static_cast<uint32_t>(LoadH(sr.da + b1)) << 16);
      sc.dw[1][b / 2] = LoadH(sr.db + b0) | (static_cast<uint32_t>(LoadH(sr.db + b1)) << 16);
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int b = 0; b < 8; ++b) sc.dx[j][h][b] = LoadF(sr.xd[j][h] + (b < left ? b : left - 1));
      }
    }
  }
}

__device__ __forceinline__ float HalfOf(uint32_t pair, int hi) {
  return HalfBits(static_cast<uint16_t>(hi ? pair >> 16 : pair & 0xFFFF));
}

// Block b of the segment into the lane's running trees; past the row's end (only when !kFull, with
// `left` blocks of the segment inside the row) the loads repeat the last block and the terms are +0.
template <int NT, bool kFull, int b>
__device__ __forceinline__ void BlockTerms(const SegmentRows<NT>& sr, const SegmentScales<NT>& sc, int left,
                                           Tree (&tree)[NT][4], float (&sum)[NT][4]) {
  const bool valid = kFull || b < left;
  const int at = kFull ? b : (valid ? b : left - 1);
  const int2 u = Load8(sr.wa + at * 32), v = Load8(sr.wb + at * 32);
  const int a[4] = {u.x, v.x, u.y, v.y};
  const float dw[2] = {HalfOf(sc.dw[0][b / 2], b & 1), HalfOf(sc.dw[1][b / 2], b & 1)};
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int2 xb = Load8(sr.xq[j] + at * 32);
    int c[4];
    Mma32Biased(c, a, xb.x, xb.y);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float t = Q8_0Term(c[e], dw[e >> 1], sc.dx[j][e & 1][b]);
      if constexpr (!kFull) t = valid ? t : 0.0f;
      tree[j][e].template Add<b>(t, &sum[j][e]);
    }
  }
}

// The sums of segment seg for the lane's 4 * NT outputs (c[e] of n-tile j: weight row g + 8 (e / 2),
// activation row 8j + 2q + e % 2), in qblock.cuh's tree; blocks past the row's end are +0 unless kFull.
template <int NT, bool kFull, bool kVec>
__device__ __forceinline__ void SegmentSums(const LaneRows<NT>& lr, Q8Act x, int64_t nb, int64_t seg,
                                            float (&sum)[NT][4]) {
  const int64_t b0 = seg * kBlocksPerSegment;
  SegmentRows<NT> sr;
  sr.wa = lr.wa + b0 * 32;
  sr.wb = lr.wb + b0 * 32;
  sr.da = lr.da + b0;
  sr.db = lr.db + b0;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    sr.xq[j] = x.q + lr.xq[j] + b0 * 32;
    sr.xd[j][0] = x.d + lr.xd[j][0] + b0;
    sr.xd[j][1] = x.d + lr.xd[j][1] + b0;
  }
  const int left = static_cast<int>(nb - b0);
  SegmentScales<NT> sc;
  LoadScales<NT, kVec>(sr, left, sc);
  Tree tree[NT][4];
  BlockTerms<NT, kFull, 0>(sr, sc, left, tree, sum);
  BlockTerms<NT, kFull, 1>(sr, sc, left, tree, sum);
  BlockTerms<NT, kFull, 2>(sr, sc, left, tree, sum);
  BlockTerms<NT, kFull, 3>(sr, sc, left, tree, sum);
  BlockTerms<NT, kFull, 4>(sr, sc, left, tree, sum);
  BlockTerms<NT, kFull, 5>(sr, sc, left, tree, sum);
  BlockTerms<NT, kFull, 6>(sr, sc, left, tree, sum);
  BlockTerms<NT, kFull, 7>(sr, sc, left, tree, sum);
}

// Grid: `ytiles` blocks for each tile of 16 weight rows of the job's matrices in order, block b taking
// the tile b / ytiles and the 8 * NT activation rows of tile b % ytiles (the blocks that read the same
// weights run together). Warp w of the `slots` takes the segments w, w + slots, ... Shared memory: two
// buffers of [slots][NT][32 lanes] float4 segment sums; thread t < 32 * NT keeps the running piece and
// total of lane t % 32's outputs of n-tile t / 32 and adds the segments to them in qblock.cuh's order.
template <int NT>
__global__ void __launch_bounds__(32 * kMaxSlots, NT == 1 ? 4 : 2)
    SmallGemmKernel(MatVecJob job, Q8Act x, int64_t n, int slots, int ytiles, bool vec) {
  extern __shared__ float4 smem[];
  const int lane = threadIdx.x & 31, sw = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  const int64_t block = blockIdx.x / ytiles, ytile = blockIdx.x % ytiles;
  int k = 0;
  int64_t first = 0, tiles = (job.w[0].rows + 15) / 16;
  while (k + 1 < job.count && block >= first + tiles) {
    first += tiles;
    ++k;
    tiles = (job.w[k].rows + 15) / 16;
  }
  const DeviceMatrix& w = job.w[k];
  const int64_t cols = w.cols, nb = cols / 32, ng = QuantSegments(cols);
  const int64_t o0 = (block - first) * 16, last = w.rows - 1;

  if (ytile == 0) {  // weights and scales no kernel writes: before the wait
    const int64_t row = Min(o0 + (lane >> 1), last);
    for (int64_t s = sw; s < ng; s += slots) PrefetchL2(w.q + row * cols + s * 256 + (lane & 1) * 128);
    const auto* sc = reinterpret_cast<const uint8_t*>(w.d + o0 * nb);
    const int64_t sc_bytes = (Min(o0 + 16, w.rows) - o0) * nb * 2;
    for (int64_t off = (sw * 32 + lane) * 128; off < sc_bytes; off += slots * 32 * 128) PrefetchL2(sc + off);
  }
  AfterPrevious();

  LaneRows<NT> lr;
  const int64_t r0 = ytile * 8 * NT;
  const int64_t ra = Min(o0 + g, last), rb = Min(o0 + g + 8, last);
  lr.wa = w.q + ra * cols + 8 * q;
  lr.wb = w.q + rb * cols + 8 * q;
  lr.da = w.d + ra * nb;
  lr.db = w.d + rb * nb;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    lr.xq[j] = static_cast<int>(Min(r0 + 8 * j + g, n - 1) * cols + 8 * q);
#pragma unroll
    for (int h = 0; h < 2; ++h) lr.xd[j][h] = static_cast<int>(Min(r0 + 8 * j + 2 * q + h, n - 1) * nb);
  }
  // vec: 16-byte scale loads (every row's scales start 16-byte aligned, the buffers themselves are).

  auto buffer = [&](int round, int s) { return smem + ((round & 1) * slots + s) * NT * 32; };
  const int t = threadIdx.x;
  const bool combines = t < NT * 32;
  float4 piece = make_float4(0.0f, 0.0f, 0.0f, 0.0f), total = piece;
  const int pieces = QuantPieces(cols);
  int p = 0;
  int64_t p_end = PieceBegin(ng, pieces, 1);
  auto close_piece = [&] {
    total = p == 0 ? piece
                   : make_float4(__fadd_rn(total.x, piece.x), __fadd_rn(total.y, piece.y),
                                 __fadd_rn(total.z, piece.z), __fadd_rn(total.w, piece.w));
    piece = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    ++p;
    p_end = PieceBegin(ng, pieces, p + 1);
  };

  int round = 0;
  for (int64_t base = 0; base < ng; base += slots, ++round) {
    const int64_t seg = base + sw;
    if (seg < ng) {
      float sum[NT][4];
      if ((seg + 1) * kBlocksPerSegment > nb) {
        SegmentSums<NT, false, false>(lr, x, nb, seg, sum);
      } else if (vec) {
        SegmentSums<NT, true, true>(lr, x, nb, seg, sum);
      } else {
        SegmentSums<NT, true, false>(lr, x, nb, seg, sum);
      }
      float4* out = buffer(round, sw);
#pragma unroll
      for (int j = 0; j < NT; ++j)
        out[j * 32 + lane] = make_float4(sum[j][0], sum[j][1], sum[j][2], sum[j][3]);
    }
    __syncthreads();  // the round's sums are in (and the other buffer was read by everyone before this)
    if (combines) {
      const int count = static_cast<int>(Min(slots, ng - base));
      for (int s = 0; s < count; ++s) {
        while (base + s >= p_end) close_piece();
        const float4 v = buffer(round, s)[t];
        piece = make_float4(__fadd_rn(piece.x, v.x), __fadd_rn(piece.y, v.y), __fadd_rn(piece.z, v.z),
                            __fadd_rn(piece.w, v.w));
      }
    }
  }
  if (!combines) return;
  while (p < pieces) close_piece();
  const MatVecOut out = job.out[k];
  const int j = t / 32, l = t % 32;
  const float v[4] = {total.x, total.y, total.z, total.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int64_t o = o0 + l / 4 + 8 * (e >> 1), r = r0 + 8 * j + 2 * (l % 4) + (e & 1);
    if (o <= last && r < n) StoreResult(out, r, o, v[e]);
  }
}

template <int NT>
cudaError_t LaunchSmall(const MatVecJob& job, Q8Act xq, int64_t n, cudaStream_t stream) {
  const auto ytiles = static_cast<int>((n + 8 * NT - 1) / (8 * NT));
  int64_t tiles = 0;
  for (int k = 0; k < job.count; ++k) tiles += (job.w[k].rows + 15) / 16;
  const int want = tiles * ytiles >= 4 * MultiprocessorCount() ? kBusySlots : kMaxSlots;
  // At least NT warps: they are the ones that add the segments up (rows of one segment have idle ones).
  const int slots = std::max(NT, static_cast<int>(std::min<int64_t>(QuantSegments(job.w[0].cols), want)));
  const size_t bytes = static_cast<size_t>(2 * slots * NT * 32 * 16);  // at most 16 KiB
  const bool vec = job.w[0].cols / 32 % 8 == 0;
  return Launch(SmallGemmKernel<NT>, static_cast<unsigned>(tiles * ytiles), 32 * slots, bytes, stream, job,
                xq, n, slots, ytiles, vec);
}

}  // namespace

cudaError_t SmallQuantGemm(const MatVecJob& job, Q8Act xq, int64_t n, cudaStream_t stream) {
  if (n <= 0 || job.count <= 0) return cudaSuccess;
  if (job.w[0].format != MatFormat::kQ8_0) return cudaErrorInvalidValue;
  if (n <= 8) return LaunchSmall<1>(job, xq, n, stream);
  return LaunchSmall<2>(job, xq, n, stream);
}

}  // namespace fak::cuda
