// The tensor-core GEMM's tiles (gemm.cu): what a 64-row tile of a segment holds in shared memory and
// how it gets there (cp.async copy plans, ldmatrix operands, the per-block scales padded against bank
// conflicts), and one struct per weight format that stages, unpacks and multiplies its segment:
// Q8_0Gemm (a float term per 32-weight block), Q4_KGemm and Q6_KGemm (integer sums per super-block,
// one term per segment; qblock.cuh). gemm.cu's kernel walks the segments with any of them; this header
// is for it alone.
#pragma once

#include <cstdint>

#include "backends/cuda/async_copy.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/qblock.cuh"

namespace fak::cuda::gemm {

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

}  // namespace fak::cuda::gemm
