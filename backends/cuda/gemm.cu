// Quantized weights times many int8 activation rows on the tensor cores: prefill and large batches.
//
// A block of 128 threads computes a tile of 64 weight rows x 64 activation rows, one segment (8 blocks
// of 32 weights, qblock.cuh) at a time. Each of the 4 warps computes 32 x 32 outputs (or, with 256
// threads a block, each of 8 warps 16 x 32: see GemmWarps) with int8 mma.sync (exact s32 out) and sums
// them in qblock.cuh's order, as the matrix-vector kernels do, so a row's result is the same bits
// whichever kernel computed it, and the batch size only decides which one runs:
//   Q8_0   one m16n8k32 per 32-weight block, its f32 term, the segment's tree of 8 terms;
//   Q4_K   one m16n8k32 per block weighted by the sub-block's scale in an integer multiply-add, one
//          more with the mins as the A operand accumulating the mins' part, one f32 term per segment;
//   Q6_K   two m16n8k16 per block (a scale per 16 weights), weighted in integers, one term per segment.
//
// The weights stay in their device layout in shared memory (Q4_K nibbles and Q6_K bit planes are taken
// apart when the mma operands are built): cp.async brings segment s + 1 while segment s is computed,
// two stages; the few scales per segment come through registers. The mma operands come out of shared
// memory by ldmatrix, already in the registers the mma reads (Q4_K: its raw nibble bytes, masked
// after), and row strides are 16 bytes past a multiple of 128 so its eight rows meet no bank conflict.
//
// Napkin math (pp512, 1.5B geometry): 1.3 G multiply-adds per token, in 32-weight blocks: 20 M blocks
// per token. Q8_0 spends ~5 instructions a block and output on its term (mma a small part): ~2.3 ms for
// the 512 tokens' matrices at 4 warp-instructions per clock per SM on 132 SMs at 1.98 GHz, the floor of
// that design; the K-quants' integer sums take that to ~1.5 a block and output.
#include <cstdlib>
#include <type_traits>

#include "backends/cuda/async_copy.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/pdl.cuh"
#include "backends/cuda/qblock.cuh"

namespace fak::cuda {
namespace {

constexpr int kTile = 64;                // weight rows and activation rows per block
constexpr int kSeg = kBlocksPerSegment;  // blocks per segment
constexpr int kSegWeights = kSeg * 32;

// f(c) for c = tid, tid + kThreads, ... below kCount, unrolled (the trip count a compile-time constant, so
// no loop and the addresses of later items as offsets from the first).
template <int kThreads, int kCount, class Fn>
__device__ __forceinline__ void ForEach(int tid, Fn&& f) {
#pragma unroll
  for (int k = 0; k < (kCount + kThreads - 1) / kThreads; ++k) {
    const int c = tid + k * kThreads;
    if (kCount % kThreads == 0 || c < kCount) f(c);
  }
}

// A thread's share of copying a 64-row tile, kParts 16-byte pieces a row: piece `part` of rows row0,
// row0 + kRowStep, ... Where the rows and pieces are in memory is found once per kernel; a segment's
// copies then only add its offset.
template <int kThreads, int kParts>
struct TileCopies {
  static_assert(kThreads % kParts == 0 && (kTile * kParts) % kThreads == 0);
  static constexpr int kRowStep = kThreads / kParts, kCount = kTile * kParts / kThreads;
  int row0, part;
  const uint8_t* src;  // piece `part` of row row0 in segment 0
  int64_t row_bytes;   // from one row to the next in global memory
  uint32_t ok = 0;     // bit k: row row0 + k * kRowStep exists
  // Rows first_row.. of a matrix of `rows` rows, each row_bytes long; the pieces start at byte `lead`
  // of a row's segment.
  __device__ __forceinline__ TileCopies(int tid, const void* base, int64_t first_row, int64_t rows,
                                        int64_t row_bytes_, int lead)
      : row0(tid / kParts), part(tid % kParts), row_bytes(row_bytes_) {
    src = static_cast<const uint8_t*>(base) + (first_row + row0) * row_bytes + lead + 16 * part;
#pragma unroll
    for (int k = 0; k < kCount; ++k) ok |= static_cast<uint32_t>(first_row + row0 + k * kRowStep < rows) << k;
  }
  // The copies of the segment at byte seg_off of every row into dst(row, part), zeros where a row does
  // not exist or !pieces_ok (`safe`: an address to name for those).
  template <class Dst>
  __device__ __forceinline__ void Issue(Dst&& dst, int64_t seg_off, bool pieces_ok, const void* safe) const {
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      const bool valid = pieces_ok && ((ok >> k) & 1) != 0;
      const uint8_t* from = src + k * kRowStep * row_bytes + seg_off;
      CopyAsync16(dst(row0 + k * kRowStep, part), valid ? from : safe, valid);
    }
  }
};

// Where a weight row's per-block values sit in an array of kTile: rows r and r + 8 of each group of 16
// side by side, as the lane that computes both reads them (one load).
__device__ __forceinline__ int PairSlot(int row) { return (row & ~15) | ((row & 7) << 1) | ((row >> 3) & 1); }

// The per-block values of a segment sit block-major, one row of the array per block b. They are stored
// by warps whose lanes hold 4 consecutive tile rows x the 8 blocks, so rows kTile (or 2 kTile) floats
// long would put a warp's 8 blocks on the same banks (8-way conflicts, 16 wavefronts for a float2
// store: ncu counted them as 80-88% of all shared-store wavefronts). Padded to these lengths, a warp's
// stores take 1 wavefront (one float per tile row), 2 (two floats per row, one at a time) or 4 (a float2
// per row); each stays a multiple of 16 bytes, as the vector loads of the compute loop need.
constexpr int kRow1 = kTile + 4;
constexpr int kRow2 = 2 * kTile + 4;

// Four 8x8 matrices of 16-bit elements (here: 8 rows x 16 bytes of int8) from shared memory, lane l
// giving the address of row l % 8 of matrix l / 8; register i holds, for lane (g = l / 4, q = l % 4),
// bytes 4q..4q+3 of row g of matrix i: the mma operands' order, with no moves to assemble them.
__device__ __forceinline__ void LoadMatrices4(int* r, const void* row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void LoadMatrices2(int* r, const void* row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
// The row and byte offset a lane addresses to load the m16 x k32 operand at (row0, col0).
__device__ __forceinline__ int OperandRow(int lane) { return (lane & 7) + ((lane >> 3) & 1) * 8; }
__device__ __forceinline__ int OperandCol(int lane) { return (lane >> 4) * 16; }

// The K-quants' dots (qblock.cuh's integer sums): c = a . b from zero, and c += a . b (the Q4_K mins,
// one value per row broadcast over their 32 columns as A).
__device__ __forceinline__ void Mma32(int* c, const int* a, int b0, int b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}
__device__ __forceinline__ void Mma32Acc(int* c, const int* a, int b0, int b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void Mma16(int* c, int a0, int a1, int b0) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0), "r"(0));
}

// One segment of 64 activation rows: int8 values (row stride kStride) and their scales, block-major
// (Q8_0: dsum[b][row]) or one per row (the K-quants: dsum[0][row]), so a lane reads its two activation
// rows' scales (t, t + 1, t even) in one 8-byte load.
template <int kStride>
struct alignas(16) XStage {
  int8_t q[kTile][kStride];
  float dsum[kSeg][kRow1];
};

// Rows of int8 values, 16 pieces of 16 bytes a row and segment (two per 32-value block): the
// activations, and Q8_0's weights.
template <int kThreads>
using Int8Copies = TileCopies<kThreads, 16>;

// Segment seg of such rows (cols values long) into q; blocks past the row's end copy nothing.
template <int kThreads, int kStride>
__device__ __forceinline__ void IssueInt8(int8_t (&q)[kTile][kStride], const Int8Copies<kThreads>& plan,
                                          const void* base, int64_t cols, int64_t seg) {
  const bool block_ok = seg * kSeg + (plan.part >> 1) < cols / 32;
  plan.Issue([&](int row, int part) { return &q[row][part * 16]; }, seg * kSegWeights, block_ok, base);
}

// The activation scales of a segment: 4 (2) per thread of 128 (256), fetched a segment ahead and
// stored after.
template <int kThreads>
struct XScales {
  float v[kTile * kSeg / kThreads];
  __device__ __forceinline__ void Load(Q8Act x, int64_t cols, int64_t n, int64_t r0, int64_t seg, int tid) {
    const int64_t nb = cols / 32;
#pragma unroll
    for (int k = 0; k < kTile * kSeg / kThreads; ++k) {
      const int e = tid + k * kThreads, row = e >> 3, b = e & 7;
      const int64_t r = r0 + row, blk = seg * kSeg + b;
      v[k] = r < n && blk < nb ? x.d[r * nb + blk] : 0.0f;
    }
  }
  template <int kStride>
  __device__ __forceinline__ void Store(XStage<kStride>& s, int tid) const {
#pragma unroll
    for (int k = 0; k < kTile * kSeg / kThreads; ++k) {
      const int e = tid + k * kThreads;
      s.dsum[e & 7][e >> 3] = v[k];
    }
  }
};

// The activation scale of a segment for the K-quants (groups of 256: block 8 seg's scale is the
// segment's), one per row, fetched a segment ahead by the first 64 threads and stored after at
// dsum[0][row].
template <int kThreads>
struct XSegScales {
  float v = 0.0f;
  __device__ __forceinline__ void Load(Q8Act x, int64_t cols, int64_t n, int64_t r0, int64_t seg, int tid) {
    const int64_t r = r0 + tid;
    if (tid < kTile) v = r < n ? x.d[r * (cols / 32) + seg * kSeg] : 0.0f;
  }
  template <int kStride>
  __device__ __forceinline__ void Store(XStage<kStride>& s, int tid) const {
    if (tid < kTile) s.dsum[0][tid] = v;
  }
};

// Q8_0: the int8 weights of a segment and their f16 scales (as f32, block-major).
template <int kThreadCount>
struct Q8_0Gemm {
  static constexpr int kThreads = kThreadCount;
  static constexpr int kXStride = 272;  // ldmatrix rows 16 bytes apart mod 128: conflict-free
  static constexpr bool kPrepare = false, kSegInt = false;
  struct WStage {
    int8_t q[kTile][272];
    float d[kSeg][kRow1];
  };
  struct Dec {};
  struct Scales {
    uint16_t v[kTile * kSeg / kThreads];
    __device__ __forceinline__ void Load(const DeviceMatrix& w, int64_t o0, int64_t seg, int tid) {
      const int64_t nb = w.cols / 32;
#pragma unroll
      for (int k = 0; k < kTile * kSeg / kThreads; ++k) {
        const int e = tid + k * kThreads, row = e >> 3, b = e & 7;
        const int64_t o = o0 + row, blk = seg * kSeg + b;
        v[k] = o < w.rows && blk < nb ? w.d[o * nb + blk] : 0;
      }
    }
    __device__ __forceinline__ void Store(WStage& s, int tid) const {
#pragma unroll
      for (int k = 0; k < kTile * kSeg / kThreads; ++k) {
        const int e = tid + k * kThreads;
        s.d[e & 7][e >> 3] = HalfBits(v[k]);
      }
    }
  };
  using Copies = Int8Copies<kThreads>;
  static __device__ __forceinline__ Copies Plan(const DeviceMatrix& w, int64_t o0, int tid) {
    return Copies(tid, w.q, o0, w.rows, w.cols, 0);
  }
  static __device__ __forceinline__ void Issue(WStage& s, const Copies& plan, const DeviceMatrix& w,
                                               int64_t seg) {
    IssueInt8(s.q, plan, w.q, w.cols, seg);
  }
  static __device__ __forceinline__ void Prepare(const WStage&, XStage<kXStride>&, Dec&, int) {}
  // The A operand of block b for rows `row` and row + 8, and what the terms need of those rows.
  struct Rows {
    int a[4];
    float dw[2];
  };
  static __device__ __forceinline__ Rows RowsOf(const WStage& s, const Dec&, int row0, int b, int lane) {
    Rows r;
    LoadMatrices4(r.a, &s.q[row0 + OperandRow(lane)][32 * b + OperandCol(lane)]);
    const int row = row0 + (lane >> 2);
    r.dw[0] = s.d[b][row], r.dw[1] = s.d[b][row + 8];
    return r;
  }
  static __device__ __forceinline__ float Term(const Rows& rw, int h, const int* c, int e, float dx) {
    return Q8_0Term(c[e], rw.dw[h], dx);
  }
};

// Q4_K: the quants of the 144-byte super-blocks as stored (row stride 144: 16 bytes mod 128,
// conflict-free); the headers through registers (Scales), decoded a segment ahead into the stage: per
// sub-block and row the integer scale and the min (as four equal bytes, an mma operand), per row d and
// dmin. A block's dot is one mma and its weighting by the scale one integer multiply-add per output;
// the mins' part is one more mma per block (the mins as A, broadcast over their 32 columns), summed in
// its accumulators over the segment; each segment's term is then computed once (qblock.cuh).
template <int kThreadCount>
struct Q4_KGemm {
  static constexpr int kThreads = kThreadCount;
  static constexpr int kXStride = 272;
  static constexpr bool kPrepare = false, kSegInt = true;
  struct WStage {
    uint8_t raw[kTile][144];  // bytes 16.. of each row's super-block: the quants
    int sc[kSeg][kRow1];      // the scale per sub-block and row, at its PairSlot
    // The min x 0x01010101 per sub-block and row r, twice: rows r and r + 8 as the quad {r, r + 8, r,
    // r + 8} at 2 x PairSlot(r) & ~3, the A operand of the mins' mma in one load.
    int mq[kSeg][kRow2];
    float dd[kRow2];  // {d, dmin} per row (at 2 x its PairSlot)
  };
  struct Dec {};
  // The super-blocks' first 16 bytes (d, dmin, the 12 bytes of scales and mins) through registers: each
  // thread takes one sub-block of 64 / (kThreads / 8) rows, read a segment ahead and decoded after.
  struct Scales {
    static constexpr int kRows = kTile * kSeg / kThreads;
    int4 head[kRows];
    __device__ __forceinline__ void Load(const DeviceMatrix& w, int64_t o0, int64_t seg, int tid) {
      const int64_t nsb = w.cols / 256;
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        const int64_t o = o0 + ((tid + k * kThreads) >> 3);
        head[k] = o < w.rows ? Load16(w.q + (o * nsb + seg) * 144) : make_int4(0, 0, 0, 0);
      }
    }
    __device__ __forceinline__ void Store(WStage& s, int tid) const {
      const int b = tid & 7;
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        const int row = (tid + k * kThreads) >> 3;
        const auto h = static_cast<unsigned>(head[k].x);
        int sc, m;
        Q4_KScaleMinWords(static_cast<unsigned>(head[k].y), static_cast<unsigned>(head[k].z),
                          static_cast<unsigned>(head[k].w), b, &sc, &m);
        const int slot = PairSlot(row);
        s.sc[b][slot] = sc;
        s.mq[b][2 * (slot & ~1) + (slot & 1)] = s.mq[b][2 * (slot & ~1) + 2 + (slot & 1)] = m * 0x01010101;
        if (b == 0) {
          *reinterpret_cast<float2*>(&s.dd[2 * PairSlot(row)]) = make_float2(
              HalfBits(static_cast<uint16_t>(h & 0xFFFF)), HalfBits(static_cast<uint16_t>(h >> 16)));
        }
      }
    }
  };
  using Copies = TileCopies<kThreads, 8>;  // the 128 bytes of quants after the 16 of the header
  static __device__ __forceinline__ Copies Plan(const DeviceMatrix& w, int64_t o0, int tid) {
    return Copies(tid, w.q, o0, w.rows, w.cols / 256 * 144, 16);
  }
  static __device__ __forceinline__ void Issue(WStage& s, const Copies& plan, const DeviceMatrix& w,
                                               int64_t seg) {
    plan.Issue([&](int row, int part) { return &s.raw[row][16 + 16 * part]; }, seg * 144, true, w.q);
  }
  static __device__ __forceinline__ void Prepare(const WStage&, XStage<kXStride>&, Dec&, int) {}
  struct Rows {
    int a[4];
    int sc[2];  // rows g and g + 8 of the lane
    int mq[4];  // the mins' A operand
  };
  // Sub-blocks 2j and 2j + 1 share their 32 bytes (low and high nibbles): the raw bytes, masked.
  static __device__ __forceinline__ Rows RowsOf(const WStage& s, const Dec&, int row0, int b, int lane) {
    Rows r;
    const int shift = 4 * (b & 1);
    int raw[4];
    LoadMatrices4(raw, &s.raw[row0 + OperandRow(lane)][16 + 32 * (b >> 1) + OperandCol(lane)]);
#pragma unroll
    for (int k = 0; k < 4; ++k) r.a[k] = (static_cast<unsigned>(raw[k]) >> shift) & 0x0F0F0F0F;
    const int slot = PairSlot(row0 + (lane >> 2));  // even
    const int2 v = *reinterpret_cast<const int2*>(&s.sc[b][slot]);
    const int4 m = *reinterpret_cast<const int4*>(&s.mq[b][2 * slot]);
    r.sc[0] = v.x, r.sc[1] = v.y;
    r.mq[0] = m.x, r.mq[1] = m.y, r.mq[2] = m.z, r.mq[3] = m.w;
    return r;
  }
  // One block's dots with 8 activation rows (bv): s1 += scale x dot, s2 += min x the activations' sum.
  static __device__ __forceinline__ void Accumulate(const Rows& rw, const int* bv, int* s1, int* s2) {
    int c[4];
    Mma32(c, rw.a, bv[0], bv[1]);
    Mma32Acc(s2, rw.mq, bv[0], bv[1]);
#pragma unroll
    for (int e = 0; e < 4; ++e) s1[e] += rw.sc[e >> 1] * c[e];
  }
  static constexpr int kS2Start = kExactBias;  // s2 biased, as Q4_KSegTerm takes it
  struct SegRows {
    float d[2], dmin[2];
  };
  static __device__ __forceinline__ SegRows SegRowsOf(const WStage& s, int row0, int lane) {
    const float4 v = *reinterpret_cast<const float4*>(&s.dd[2 * PairSlot(row0 + (lane >> 2))]);
    return SegRows{{v.x, v.z}, {v.y, v.w}};
  }
  static __device__ __forceinline__ float SegTerm(const SegRows& sr, int h, int s1, int s2, float dx) {
    return Q4_KSegTerm(s1, s2, sr.d[h], sr.dmin[h], dx);
  }
};

// Q6_K: the 208-byte blocks of weights.h (ql[128], qh[64], scales[16]; stride 208 keeps 4-byte loads of
// 8 rows x 4 lanes conflict-free) and the f16 d through registers; each block is two m16n8k16.
template <int kThreadCount>
struct Q6_KGemm {
  static constexpr int kThreads = kThreadCount;
  static constexpr int kXStride = 272;
  static constexpr bool kPrepare = true, kSegInt = true;
  struct WStage {
    uint8_t raw[kTile][208];
    float d[kTile];
  };
  struct alignas(16) Dec {
    int8_t q[kTile][272];  // the segment's 6-bit values minus 32, in weight order
    // The int8 scales of each block's two halves, a row's pair at 2 x its PairSlot.
    int sc[kSeg][kRow2];
  };
  struct Scales {
    uint16_t v = 0;
    __device__ __forceinline__ void Load(const DeviceMatrix& w, int64_t o0, int64_t seg, int tid) {
      const int64_t o = o0 + tid;
      if (tid < kTile && o < w.rows) v = w.d[o * (w.cols / 256) + seg];
    }
    __device__ __forceinline__ void Store(WStage& s, int tid) const {
      if (tid < kTile) s.d[tid] = HalfBits(v);
    }
  };
  struct Copies {  // 13 pieces a row do not divide among the threads evenly: found per segment
    int64_t o0;
    int tid;
  };
  static __device__ __forceinline__ Copies Plan(const DeviceMatrix&, int64_t o0, int tid) {
    return {o0, tid};
  }
  static __device__ __forceinline__ void Issue(WStage& s, const Copies& plan, const DeviceMatrix& w,
                                               int64_t seg) {
    const int64_t nsb = w.cols / 256, o0 = plan.o0;
    ForEach<kThreads, kTile * 13>(plan.tid, [&](int c) {
      const int row = c / 13, part = c % 13;
      const int64_t o = o0 + row;
      const bool ok = o < w.rows;
      CopyAsync16(&s.raw[row][16 * part], ok ? w.q + (o * nsb + seg) * 208 + 16 * part : w.q, ok);
    });
  }
  // Unpacks the segment: per row 4 runs of 16 positions l0.. of each 128-weight half n, four blocks each.
  // Consecutive threads take consecutive rows, so the 8 threads of a 16-byte access phase read rows 208
  // bytes apart and write rows 272 bytes apart: 8 different bank groups either way.
  static __device__ __forceinline__ void Prepare(const WStage& s, XStage<kXStride>&, Dec& dec, int tid) {
    ForEach<kThreads, kTile * 4>(tid, [&](int c) {
      const int row = c & (kTile - 1), n = (c / kTile) & 1, l0 = 16 * (c / (2 * kTile));
      const uint8_t* raw = s.raw[row];
      const int4 qa = *reinterpret_cast<const int4*>(raw + 64 * n + l0);
      const int4 qb = *reinterpret_cast<const int4*>(raw + 64 * n + 32 + l0);
      const int4 qh = *reinterpret_cast<const int4*>(raw + 128 + 32 * n + l0);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int4 lo = And(Shr(k & 1 ? qb : qa, k >= 2 ? 4 : 0), 0x0F0F0F0F);
        *reinterpret_cast<int4*>(&dec.q[row][128 * n + 32 * k + l0]) =
            Q6Values(lo, And(Shr(qh, 2 * k), 0x03030303));
      }
    });
    ForEach<kThreads, kTile * kSeg>(tid, [&](int c) {
      const int row = c >> 3, b = c & 7;
      const int8_t* sc = reinterpret_cast<const int8_t*>(s.raw[row] + 192 + 2 * b);
      *reinterpret_cast<int2*>(&dec.sc[b][2 * PairSlot(row)]) = make_int2(sc[0], sc[1]);
    });
  }
  struct Rows {
    int a[4];  // rows row, row + 8 of the low 16 weights, then of the high 16
    int sc_lo[2], sc_hi[2];
  };
  static __device__ __forceinline__ Rows RowsOf(const WStage&, const Dec& dec, int row0, int b, int lane) {
    Rows r;
    LoadMatrices4(r.a, &dec.q[row0 + OperandRow(lane)][32 * b + OperandCol(lane)]);
    const int4 v = *reinterpret_cast<const int4*>(&dec.sc[b][2 * PairSlot(row0 + (lane >> 2))]);
    r.sc_lo[0] = v.x, r.sc_hi[0] = v.y, r.sc_lo[1] = v.z, r.sc_hi[1] = v.w;
    return r;
  }
  // One block's two halves with 8 activation rows (bv): s1 += scale x dot for each.
  static __device__ __forceinline__ void Accumulate(const Rows& rw, const int* bv, int* s1, int*) {
    int lo[4], hi[4];
    Mma16(lo, rw.a[0], rw.a[1], bv[0]);
    Mma16(hi, rw.a[2], rw.a[3], bv[1]);
#pragma unroll
    for (int e = 0; e < 4; ++e) s1[e] += rw.sc_lo[e >> 1] * lo[e] + rw.sc_hi[e >> 1] * hi[e];
  }
  static constexpr int kS2Start = 0;
  struct SegRows {
    float d[2];
  };
  static __device__ __forceinline__ SegRows SegRowsOf(const WStage& s, int row0, int lane) {
    const int row = row0 + (lane >> 2);
    return SegRows{{s.d[row], s.d[row + 8]}};
  }
  static __device__ __forceinline__ float SegTerm(const SegRows& sr, int h, int s1, int, float dx) {
    return Q6_KSegTerm(s1, sr.d[h], dx);
  }
};

template <class F>
struct alignas(16) Stage {
  typename F::WStage w;
  XStage<F::kXStride> x;
};

// The segment's terms for the warp's 32 x 32 outputs, each segment's tree added to acc. Blocks at or
// past nvalid (the row's end inside its last segment) count as +0 (only when !kFull).
template <class F, int b, bool kFull>
__device__ __forceinline__ void Block(const Stage<F>& st, const typename F::Dec& dec, int row0, int tok0,
                                      int g, int q, int nvalid, Tree (&tree)[4][4], float (&segsum)[4][4]) {
  const int lane = 4 * g + q;
  const typename F::Rows rw = F::RowsOf(st.w, dec, row0, b, lane);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int tq = tok0 + 8 * j + 2 * q;
    int c[4];   // qblock.cuh's biased dots
    int bv[2];  // k = 4q.. and 16 + 4q.. of activation row tok0 + 8j + g
    LoadMatrices2(bv, &st.x.q[tok0 + 8 * j + (lane & 7)][32 * b + ((lane >> 3) & 1) * 16]);
    Mma32Biased(c, rw.a, bv[0], bv[1]);
    const float2 dx = *reinterpret_cast<const float2*>(&st.x.dsum[b][tq]);  // tq is even
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float t = F::Term(rw, e >> 1, c, e, e & 1 ? dx.y : dx.x);
      if constexpr (!kFull) t = b < nvalid ? t : 0.0f;
      tree[j][e].template Add<b>(t, &segsum[j][e]);
    }
  }
}

// A warp's outputs: kSub sub-tiles of 16 weight rows (2 with 4 warps a block, 1 with 8) by 32
// activation rows.
template <class F>
constexpr int kSub = 8 * 32 / F::kThreads;

template <class F, bool kFull>
__device__ __forceinline__ void ComputeSegment(const Stage<F>& st, const typename F::Dec& dec, int wm, int wn,
                                               int lane, int nvalid, float (&acc)[kSub<F>][4][4]) {
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int i = 0; i < kSub<F>; ++i) {
    Tree tree[4][4];
    float segsum[4][4];
    const int row0 = 16 * kSub<F> * wm + 16 * i, tok0 = 32 * wn;
    Block<F, 0, kFull>(st, dec, row0, tok0, g, q, nvalid, tree, segsum);
    Block<F, 1, kFull>(st, dec, row0, tok0, g, q, nvalid, tree, segsum);
    Block<F, 2, kFull>(st, dec, row0, tok0, g, q, nvalid, tree, segsum);
    Block<F, 3, kFull>(st, dec, row0, tok0, g, q, nvalid, tree, segsum);
    Block<F, 4, kFull>(st, dec, row0, tok0, g, q, nvalid, tree, segsum);
    Block<F, 5, kFull>(st, dec, row0, tok0, g, q, nvalid, tree, segsum);
    Block<F, 6, kFull>(st, dec, row0, tok0, g, q, nvalid, tree, segsum);
    Block<F, 7, kFull>(st, dec, row0, tok0, g, q, nvalid, tree, segsum);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = __fadd_rn(acc[i][j][e], segsum[j][e]);
    }
  }
}

// The K-quants (kSegInt): block b's integer sums for the warp's 16 x 32 outputs of sub-tile (row0, tok0).
template <class F, int b>
__device__ __forceinline__ void BlockInt(const Stage<F>& st, const typename F::Dec& dec, int row0, int tok0,
                                         int lane, int (&s1)[4][4], int (&s2)[4][4]) {
  const typename F::Rows rw = F::RowsOf(st.w, dec, row0, b, lane);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    int bv[2];  // k = 4q.. and 16 + 4q.. of activation row tok0 + 8j + g
    LoadMatrices2(bv, &st.x.q[tok0 + 8 * j + (lane & 7)][32 * b + ((lane >> 3) & 1) * 16]);
    F::Accumulate(rw, bv, s1[j], s2[j]);
  }
}

// A whole segment of a K-quant: the 8 blocks' integer sums, then each output's term added to acc.
template <class F>
__device__ __forceinline__ void ComputeSegmentInt(const Stage<F>& st, const typename F::Dec& dec, int wm,
                                                  int wn, int lane, float (&acc)[kSub<F>][4][4]) {
  const int q = lane & 3;
#pragma unroll
  for (int i = 0; i < kSub<F>; ++i) {
    int s1[4][4], s2[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s1[j][e] = 0, s2[j][e] = F::kS2Start;
    }
    const int row0 = 16 * kSub<F> * wm + 16 * i, tok0 = 32 * wn;
    BlockInt<F, 0>(st, dec, row0, tok0, lane, s1, s2);
    BlockInt<F, 1>(st, dec, row0, tok0, lane, s1, s2);
    BlockInt<F, 2>(st, dec, row0, tok0, lane, s1, s2);
    BlockInt<F, 3>(st, dec, row0, tok0, lane, s1, s2);
    BlockInt<F, 4>(st, dec, row0, tok0, lane, s1, s2);
    BlockInt<F, 5>(st, dec, row0, tok0, lane, s1, s2);
    BlockInt<F, 6>(st, dec, row0, tok0, lane, s1, s2);
    BlockInt<F, 7>(st, dec, row0, tok0, lane, s1, s2);
    const typename F::SegRows sr = F::SegRowsOf(st.w, row0, lane);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 dx = *reinterpret_cast<const float2*>(&st.x.dsum[0][tok0 + 8 * j + 2 * q]);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float t = F::SegTerm(sr, e >> 1, s1[j][e], s2[j][e], e & 1 ? dx.y : dx.x);
        acc[i][j][e] = __fadd_rn(acc[i][j][e], t);
      }
    }
  }
}

// Grid: x over the 64-row tiles of the job's matrices in order, y over 64-row tiles of the activations.
// kPieces = QuantPieces(cols): the segments' sums go to `piece` and pieces to `total` in order. With
// kSplit, block z computes piece z alone (its segments folded from +0, as `piece` would hold them) and
// writes it to the job's scratch, piece-major; CombinePieces then adds the four in order.
template <class F, int kPieces, bool kSplit>
__global__ void __launch_bounds__(F::kThreads, 2) GemmKernel(MatVecJob job, Q8Act xq, int64_t n) {
  constexpr int kThreads = F::kThreads, kI = kSub<F>;
  AfterPrevious();
  extern __shared__ __align__(16) uint8_t smem[];
  Stage<F>* stages = reinterpret_cast<Stage<F>*>(smem);
  __shared__ typename F::Dec dec;
  int k = 0;
  int64_t first = 0, tiles = (job.w[0].rows + kTile - 1) / kTile, row_base = 0, all_rows = 0;
  for (int m = 0; m < job.count; ++m) all_rows += job.w[m].rows;
  while (k + 1 < job.count && blockIdx.x >= first + tiles) {
    first += tiles;
    row_base += job.w[k].rows;
    ++k;
    tiles = (job.w[k].rows + kTile - 1) / kTile;
  }
  const DeviceMatrix& w = job.w[k];
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) - first) * kTile;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 1, wn = warp & 1;
  const int64_t nb = w.cols / 32, ng = QuantSegments(w.cols);
  const int64_t s_begin = kSplit ? PieceBegin(ng, kPieces, static_cast<int>(blockIdx.z)) : 0;
  const int64_t s_end = kSplit ? PieceBegin(ng, kPieces, static_cast<int>(blockIdx.z) + 1) : ng;

  float total[kI][4][4], piece[kI][4][4];
#pragma unroll
  for (int i = 0; i < kI; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) total[i][j][e] = piece[i][j][e] = 0.0f;
    }
  }
  auto close_piece = [&](int p) {
#pragma unroll
    for (int i = 0; i < kI; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          total[i][j][e] = p == 0 ? piece[i][j][e] : __fadd_rn(total[i][j][e], piece[i][j][e]);
          piece[i][j][e] = 0.0f;
        }
      }
    }
  };
  constexpr bool kPieceSums = kPieces > 1 && !kSplit;

  typename F::Scales ws;
  std::conditional_t<F::kSegInt, XSegScales<kThreads>, XScales<kThreads>> xs;
  const typename F::Copies wplan = F::Plan(w, o0, tid);
  const Int8Copies<kThreads> xplan(tid, xq.q, r0, n, w.cols, 0);
  if (s_begin < s_end) {
    F::Issue(stages[0].w, wplan, w, s_begin);
    IssueInt8(stages[0].x.q, xplan, xq.q, w.cols, s_begin);
    CopyCommit();
    ws.Load(w, o0, s_begin, tid);
    xs.Load(xq, w.cols, n, r0, s_begin, tid);
    ws.Store(stages[0].w, tid);
    xs.Store(stages[0].x, tid);
  }

  int p = 0;
  int64_t p_end = PieceBegin(ng, kPieces, 1);
  for (int64_t seg = s_begin; seg < s_end; ++seg) {
    if constexpr (kPieceSums) {
      while (seg >= p_end) {
        close_piece(p);
        ++p;
        p_end = PieceBegin(ng, kPieces, p + 1);
      }
    }
    Stage<F>& cur = stages[(seg - s_begin) & 1];
    Stage<F>& next = stages[(seg - s_begin + 1) & 1];
    const bool more = seg + 1 < s_end;
    if (more) {
      F::Issue(next.w, wplan, w, seg + 1);
      IssueInt8(next.x.q, xplan, xq.q, w.cols, seg + 1);
      ws.Load(w, o0, seg + 1, tid);
      xs.Load(xq, w.cols, n, r0, seg + 1, tid);
    }
    CopyCommit();
    CopyWait<1>();    // this thread's copies of segment seg have landed
    __syncthreads();  // and everyone's
    if constexpr (F::kPrepare) {
      F::Prepare(cur.w, cur.x, dec, tid);
      __syncthreads();
    }
    const int64_t left = nb - seg * kSeg;
    if constexpr (F::kSegInt) {  // cols is a multiple of 256: every segment is whole
      ComputeSegmentInt<F>(cur, dec, wm, wn, lane, kPieceSums ? piece : total);
    } else if (left >= kSeg) {
      ComputeSegment<F, true>(cur, dec, wm, wn, lane, kSeg, kPieceSums ? piece : total);
    } else {
      ComputeSegment<F, false>(cur, dec, wm, wn, lane, static_cast<int>(left), kPieceSums ? piece : total);
    }
    if (more) {
      ws.Store(next.w, tid);
      xs.Store(next.x, tid);
    }
    __syncthreads();  // segment seg's stage is free for segment seg + 2
  }
  if constexpr (kPieceSums) {
    for (; p < kPieces; ++p) close_piece(p);
  }

  const MatVecOut out = job.out[k];
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int i = 0; i < kI; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t o = o0 + 16 * kI * wm + 16 * i + g + 8 * (e >> 1),
                      r = r0 + 32 * wn + 8 * j + 2 * q + (e & 1);
        if (o >= w.rows || r >= n) continue;
        if constexpr (kSplit) {
          job.split[(static_cast<int64_t>(blockIdx.z) * n + r) * all_rows + row_base + o] = total[i][j][e];
        } else {
          StoreResult(out, r, o, total[i][j][e]);
        }
      }
    }
  }
}

// The four pieces of each output, from the scratch of a split GEMM, added in order: ((p0 + p1) + p2)
// + p3, the sum close_piece builds; then stored like any result.
__global__ void CombinePieces(MatVecJob job, int64_t n, int64_t all_rows) {
  AfterPrevious();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * all_rows) return;
  const int64_t r = i / all_rows;
  int64_t o = i % all_rows;
  int k = 0;
  while (o >= job.w[k].rows) o -= job.w[k++].rows;
  const int64_t stride = n * all_rows;
  float v = job.split[i];
#pragma unroll
  for (int p = 1; p < 4; ++p) v = __fadd_rn(v, job.split[p * stride + i]);
  StoreResult(job.out[k], r, o, v);
}

template <class F, int kPieces, bool kSplit>
cudaError_t LaunchGemm(const MatVecJob& job, Q8Act xq, int64_t n, int64_t tiles, cudaStream_t stream) {
  constexpr int kBytes = 2 * sizeof(Stage<F>);
  static const cudaError_t attr = cudaFuncSetAttribute(GemmKernel<F, kPieces, kSplit>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>((n + kTile - 1) / kTile),
                  kSplit ? 4 : 1);
  return Launch(GemmKernel<F, kPieces, kSplit>, grid, F::kThreads, kBytes, stream, job, xq, n);
}

// Long rows (four pieces) whose tiles would leave multiprocessors idle (fewer than two blocks each) are
// computed a piece per block when the job brings scratch for it; the bits are the same either way.
template <class F>
cudaError_t LaunchPieces(const MatVecJob& job, Q8Act xq, int64_t n, cudaStream_t stream) {
  int64_t tiles = 0, all_rows = 0;
  for (int k = 0; k < job.count; ++k) {
    tiles += (job.w[k].rows + kTile - 1) / kTile;
    all_rows += job.w[k].rows;
  }
  if (QuantPieces(job.w[0].cols) == 1) return LaunchGemm<F, 1, false>(job, xq, n, tiles, stream);
  const int64_t blocks = tiles * ((n + kTile - 1) / kTile);
  if (job.split == nullptr || job.split_floats < 4 * n * all_rows || blocks >= 2 * MultiprocessorCount()) {
    return LaunchGemm<F, 4, false>(job, xq, n, tiles, stream);
  }
  if (const cudaError_t e = LaunchGemm<F, 4, true>(job, xq, n, tiles, stream); e != cudaSuccess) return e;
  const int64_t outputs = n * all_rows;
  return Launch(CombinePieces, static_cast<unsigned>((outputs + 255) / 256), 256, 0, stream, job, n,
                all_rows);
}

// Warps per 64 x 64 tile: 4 (each 32 weight rows x 32 activation rows) or 8 (16 x 32 each: half the
// accumulators and segment trees a thread holds, the same bits). With 4 warps the kernels use all 255
// registers a thread may have at two blocks per multiprocessor, so a multiprocessor holds 8 warps, and
// Q4_K's spills over a kilobyte a thread; with 8 warps every format fits 128 registers, 16 warps a
// multiprocessor. Instructions a warp executes per segment (sm_90a SASS, one piece; 8 warps compute half
// the outputs of 4): Q8_0 1,570 with 4 warps, 884 with 8; with the K-quants' integer sums Q4_K 1,258
// and 670, Q6_K 1,649 and 960 (before them: Q4_K 2,466 and 1,167, Q6_K 2,696 and 1,475).
// Measured on an H100 (docs/bench/gpu.md, 2026-12-06 "eight warps", before the integer sums), 512
// activation rows: 8 warps are
// faster for Q4_K at every shape (1.2-1.6x), for Q6_K at most (up to 1.33x; the 27B attention and
// DeltaNet inputs 1-2% slower), for Q8_0 at the 1.5B shapes (5-8%) and slower at some 7B/27B ones (the
// 7B gate/up 12%); end to end pp512 at 1.5B: Q8_0 +7%, Q4_K_M +21% (base: the four-warp kernels before
// this form). Every format takes 8; FAK_CUDA_GEMM_WARPS=4 or 8 sets every format.
int GemmWarps() {
  const char* v = std::getenv("FAK_CUDA_GEMM_WARPS");
  if (v != nullptr && v[0] != '\0') return std::atoi(v) == 8 ? 8 : 4;
  return 8;
}

template <int kThreads>
cudaError_t LaunchFormat(const MatVecJob& job, Q8Act xq, int64_t n, cudaStream_t stream) {
  switch (job.w[0].format) {
    case MatFormat::kQ8_0: return LaunchPieces<Q8_0Gemm<kThreads>>(job, xq, n, stream);
    case MatFormat::kQ4_K: return LaunchPieces<Q4_KGemm<kThreads>>(job, xq, n, stream);
    case MatFormat::kQ6_K: return LaunchPieces<Q6_KGemm<kThreads>>(job, xq, n, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

int MultiprocessorCount() {
  static const int count = [] {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return sms;
  }();
  return count;
}

cudaError_t QuantGemm(const MatVecJob& job, Q8Act xq, int64_t n, cudaStream_t stream) {
  if (n <= 0 || job.count <= 0) return cudaSuccess;
  if (GroupFor(job.w[0].format) == kKQuantGroup && xq.group != kKQuantGroup) return cudaErrorInvalidValue;
  return GemmWarps() == 8 ? LaunchFormat<256>(job, xq, n, stream) : LaunchFormat<128>(job, xq, n, stream);
}

}  // namespace fak::cuda
