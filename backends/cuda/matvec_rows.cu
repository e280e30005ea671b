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
//     mins need it) computed there, instead of by every lane of every row;
//   - index arithmetic is 32-bit (a 64-bit division is a long call), a row's addresses are found once
//     and each round's are offsets from them;
//   - what a lane's terms need that is the same every round is found once (Q4_K: where its two
//     sub-blocks' scales and mins sit in the header), Q4_K's high nibbles are dotted in place (16 times
//     their value, exact, shifted back) instead of shifted down first, and a round's eight segment sums
//     pass through shared memory rather than eight shuffles in branches: ~165 instructions a round for
//     Q4_K (SASS of the loop) where the first version of this kernel issued ~400 (ncu).
// A row's terms are qblock.cuh's (the same functions on the same bytes) and are added in its order (the
// segment's tree for Q8_0, the lane's pair then a butterfly over the 4 lanes; for the K-quants the same
// over integers, then the segment's term; segments in order within each piece from +0; the pieces in
// order), so the bits are those of matvec.cu's kernels and the GEMM's.
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>
#include <type_traits>

#include "backends/cuda/async_copy.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/pdl.cuh"
#include "backends/cuda/qblock.cuh"

namespace fak::cuda {
namespace {

constexpr int kWarps = 4;

// The activation row in shared memory: q (cols int8), d (nb block scales), s (nb block sums).
struct Staged {
  const int8_t* q;
  const float* d;
  const int* s;
};

__device__ __forceinline__ int4 Shared16(const void* p) { return *reinterpret_cast<const int4*>(p); }

// Each format, for a lane that takes blocks b = 8g + j2 and b + 1 of segment g = 8r + gl in round r of a
// row (j2 = 2 (lane % 4), gl = lane / 4):
//   At     where the lane's loads in row o begin (Start, once per row);
//   Raw    what it loads in one round (Fetch: round r, blocks past the row's end not read);
//   Lane   what its terms need that is the same every round (LaneOf);
//   Terms  its two terms (+0 past the row's end), or for the K-quants (kSegInt, qblock.cuh):
//   Parts  its two blocks' share of the segment's integer sums and the super-block's scales, and
//   SegTerm the segment's term from the sums over its four lanes.
struct RowsQ8_0 {
  static constexpr bool kSegInt = false;
  static constexpr int kMinBlocks = 5;  // blocks a multiprocessor holds (registers: at most 96 a thread)
  struct At {
    const uint8_t* q;
    const uint16_t* d;
  };
  struct Raw {
    int4 a0, a1, a2, a3;
    uint16_t d0, d1;
  };
  struct Lane {};
  static __device__ __forceinline__ Lane LaneOf(int) { return {}; }
  static __device__ __forceinline__ At Start(const DeviceMatrix& w, int o, int gl, int j2, int nb) {
    const int b = 8 * gl + j2;
    return At{w.q + static_cast<int64_t>(o) * (nb * 32) + b * 32, w.d + static_cast<int64_t>(o) * nb + b};
  }
  static __device__ __forceinline__ Raw Fetch(const At& at, int r, int g, int j2, int nb) {
    Raw x{};
    const int b = 8 * g + j2;
    const uint8_t* wp = at.q + r * (64 * 32);  // 64 blocks a round
    const uint16_t* dp = at.d + r * 64;
    if (b < nb) x.a0 = Load16(wp), x.a1 = Load16(wp + 16), x.d0 = __ldg(dp);
    if (b + 1 < nb) x.a2 = Load16(wp + 32), x.a3 = Load16(wp + 48), x.d1 = __ldg(dp + 1);
    return x;
  }
  // The asynchronous form (MatVecRowsKernel with stages): a round's bytes copied to the lane's part of a
  // stage in shared memory, read back when computed. A stage holds kChunks 16-byte chunks a lane (chunk c
  // of lane l at 512 c + 16 l: a warp's reads of a chunk are conflict-free) and then, if kWords, one more
  // chunk with the lane's 4-byte words.
  // The block scales d0, d1 are one aligned word (nb even: the launch sees to it).
  static constexpr int kChunks = 4, kWords = 1;
  static __device__ __forceinline__ void Copy(const At& at, int r, int g, int j2, int nb, uint8_t* st) {
    const int b = 8 * g + j2;
    const uint8_t* wp = at.q + r * (64 * 32);
    if (b < nb) {
      CopyAsync16(st, wp), CopyAsync16(st + 512, wp + 16);
      CopyAsync4(st + 4 * 512, at.d + r * 64);
    }
    if (b + 1 < nb) CopyAsync16(st + 2 * 512, wp + 32), CopyAsync16(st + 3 * 512, wp + 48);
  }
  static __device__ __forceinline__ Raw Read(const uint8_t* st, const At&) {
    const auto w = *reinterpret_cast<const uint32_t*>(st + 4 * 512);
    return Raw{Shared16(st),
               Shared16(st + 512),
               Shared16(st + 2 * 512),
               Shared16(st + 3 * 512),
               static_cast<uint16_t>(w & 0xFFFF),
               static_cast<uint16_t>(w >> 16)};
  }
  static __device__ __forceinline__ void Terms(const Raw& r, const Lane&, const Staged& x, int b, int nb,
                                               float* t0, float* t1) {
    const int8_t* xp = x.q + b * 32;
    if (b < nb) {
      *t0 = Q8_0Term(Dot16(r.a1, Shared16(xp + 16), Dot16(r.a0, Shared16(xp), kExactBias)), HalfBits(r.d0),
                     x.d[b]);
    }
    if (b + 1 < nb) {
      *t1 = Q8_0Term(Dot16(r.a3, Shared16(xp + 48), Dot16(r.a2, Shared16(xp + 32), kExactBias)),
                     HalfBits(r.d1), x.d[b + 1]);
    }
  }
  static __device__ __forceinline__ int64_t RowBytes(int nb) { return nb * 32; }
  static __device__ __forceinline__ int64_t ScaleBytes(int nb) { return nb * 2; }
};

// Q4_K (cols a multiple of 256): blocks 2j and 2j + 1 of a super-block are the low and high nibbles of
// qs[32j .. 32j + 32].
struct RowsQ4_K {
  static constexpr bool kSegInt = true;
  static constexpr int kMinBlocks = 7;  // at most 72 registers
  struct At {
    const uint8_t* head;  // the super-block's 16-byte header: d, dmin, 12 bytes of scales and mins
    const uint8_t* nib;   // the lane's 32 bytes of nibbles
  };
  struct Raw {
    int4 head, q0, q1;
  };
  // Sub-blocks s = j2 and j2 + 1 have their 6-bit scales and mins at bytes 8 (s % 4) of the header's
  // packed words y, z, w (bytes 4..15): for s < 4, all 6 bits in y (scales) and z (mins); for s >= 4, the
  // low 4 bits in w (scales low, mins high nibble) and the top 2 bits of y and z. Both sub-blocks at once,
  // one per byte: shift, the mask of the low bits and the mask of the top two (none for s < 4).
  struct Lane {
    unsigned shift, low_mask, top_mask;
    bool high;
  };
  static __device__ __forceinline__ Lane LaneOf(int j2) {
    const bool high = j2 >= 4;
    return Lane{8u * static_cast<unsigned>(j2 & 3), high ? 0x0F0Fu : 0x3F3Fu, high ? 0x3030u : 0u, high};
  }
  static __device__ __forceinline__ At Start(const DeviceMatrix& w, int o, int gl, int j2, int nb) {
    const uint8_t* h = w.q + (static_cast<int64_t>(o) * (nb / 8) + gl) * 144;
    return At{h, h + 16 + 16 * j2};
  }
  static __device__ __forceinline__ Raw Fetch(const At& at, int r, int, int, int) {
    const int off = r * (8 * 144);
    return Raw{Load16(at.head + off), Load16(at.nib + off), Load16(at.nib + off + 16)};
  }
  static constexpr int kChunks = 3, kWords = 0;
  static __device__ __forceinline__ void Copy(const At& at, int r, int, int, int, uint8_t* st) {
    const int off = r * (8 * 144);
    CopyAsync16(st, at.head + off), CopyAsync16(st + 512, at.nib + off),
        CopyAsync16(st + 2 * 512, at.nib + off + 16);
  }
  static __device__ __forceinline__ Raw Read(const uint8_t* st, const At&) {
    return Raw{Shared16(st), Shared16(st + 512), Shared16(st + 2 * 512)};
  }
  static __device__ __forceinline__ void Parts(const Raw& r, const Lane& ln, const Staged& x, int b, int* s1,
                                               int* s2, float* d, float* dmin) {
    const auto hx = static_cast<unsigned>(r.head.x);
    *d = HalfBits(static_cast<uint16_t>(hx & 0xFFFF));
    *dmin = HalfBits(static_cast<uint16_t>(hx >> 16));
    const unsigned y = static_cast<unsigned>(r.head.y) >> ln.shift,
                   z = static_cast<unsigned>(r.head.z) >> ln.shift;
    const unsigned wv = static_cast<unsigned>(r.head.w) >> ln.shift;
    const unsigned sc = ((ln.high ? wv : y) & ln.low_mask) | ((y >> 2) & ln.top_mask);
    const unsigned mn = ((ln.high ? wv >> 4 : z) & ln.low_mask) | ((z >> 2) & ln.top_mask);
    const int8_t* xp = x.q + b * 32;
    // Low nibbles masked; high nibbles masked in place, their dot 16 times the sum (exact) shifted back.
    const int lo =
        Dot16(And(r.q1, 0x0F0F0F0F), Shared16(xp + 16), Dot16(And(r.q0, 0x0F0F0F0F), Shared16(xp), 0));
    const int hi16 = DotU16(And(r.q1, static_cast<int>(0xF0F0F0F0u)), Shared16(xp + 48),
                            DotU16(And(r.q0, static_cast<int>(0xF0F0F0F0u)), Shared16(xp + 32), 0));
    const int2 xs = *reinterpret_cast<const int2*>(x.s + b);  // b is even
    *s1 = static_cast<int>(sc & 0xFF) * lo + static_cast<int>(sc >> 8) * (hi16 >> 4);
    *s2 = static_cast<int>(mn & 0xFF) * xs.x + static_cast<int>(mn >> 8) * xs.y;
  }
  static __device__ __forceinline__ float SegTerm(int s1, int s2, float d, float dmin, float dx) {
    return Q4_KSegTerm(s1, s2 + kExactBias, d, dmin, dx);
  }
  static __device__ __forceinline__ int64_t RowBytes(int nb) { return nb / 8 * 144; }
  static __device__ __forceinline__ int64_t ScaleBytes(int) { return 0; }
};

// Q6_K repacked (weights.h; cols a multiple of 256): block s = 4n + k of a super-block has its low bits in
// ql[64n + 32 (k % 2) ..] (low nibbles for k < 2, high for k >= 2), its high bits at bit 2k of qh[32n ..]
// and its scales at scales[2s], scales[2s + 1]; blocks 2j and 2j + 1 share n, the nibble and qh.
struct RowsQ6_K {
  static constexpr bool kSegInt = true;
  static constexpr int kMinBlocks = 4;  // at most 128 registers
  struct At {
    const uint8_t* ql;
    const uint8_t* qh;
    const uint8_t* sc;
    const uint16_t* d;
  };
  struct Raw {
    int4 la0, la1, lb0, lb1, h0, h1;
    uint32_t sc;
    uint16_t d;
  };
  struct Lane {
    int k, shift;
  };
  static __device__ __forceinline__ Lane LaneOf(int j2) { return Lane{j2 & 3, (j2 & 3) >= 2 ? 4 : 0}; }
  static __device__ __forceinline__ At Start(const DeviceMatrix& w, int o, int gl, int j2, int nb) {
    const int64_t sb = static_cast<int64_t>(o) * (nb / 8) + gl;
    const int n = j2 >> 2;
    const uint8_t* blk = w.q + sb * 208;
    return At{blk + 64 * n, blk + 128 + 32 * n, blk + 192 + 2 * j2, w.d + sb};
  }
  static __device__ __forceinline__ Raw Fetch(const At& at, int r, int, int, int) {
    const int off = r * (8 * 208);
    const uint8_t* ql = at.ql + off;
    return Raw{Load16(ql),
               Load16(ql + 16),
               Load16(ql + 32),
               Load16(ql + 48),
               Load16(at.qh + off),
               Load16(at.qh + off + 16),
               __ldg(reinterpret_cast<const uint32_t*>(at.sc + off)),
               __ldg(at.d + 8 * r)};
  }
  // The super-block's scale d is a 2-byte value: the aligned word holding it is copied (scale arrays are
  // allocated in whole 16-byte units, so the word never reaches past one) and its half chosen on reading.
  static constexpr int kChunks = 6, kWords = 2;
  static __device__ __forceinline__ void Copy(const At& at, int r, int, int, int, uint8_t* st) {
    const int off = r * (8 * 208);
    const uint8_t* ql = at.ql + off;
#pragma unroll
    for (int c = 0; c < 4; ++c) CopyAsync16(st + c * 512, ql + 16 * c);
    CopyAsync16(st + 4 * 512, at.qh + off), CopyAsync16(st + 5 * 512, at.qh + off + 16);
    CopyAsync4(st + 6 * 512, at.sc + off);
    const auto dw = reinterpret_cast<uintptr_t>(at.d + 8 * r);
    CopyAsync4(st + 6 * 512 + 4, reinterpret_cast<const void*>(dw & ~uintptr_t{3}));
  }
  // `at` only for which half of the copied word is d.
  static __device__ __forceinline__ Raw Read(const uint8_t* st, const At& at) {
    const auto dword = *reinterpret_cast<const uint32_t*>(st + 6 * 512 + 4);
    const bool upper = (reinterpret_cast<uintptr_t>(at.d) & 2) != 0;
    return Raw{Shared16(st),
               Shared16(st + 512),
               Shared16(st + 2 * 512),
               Shared16(st + 3 * 512),
               Shared16(st + 4 * 512),
               Shared16(st + 5 * 512),
               *reinterpret_cast<const uint32_t*>(st + 6 * 512),
               static_cast<uint16_t>(upper ? dword >> 16 : dword & 0xFFFF)};
  }
  static __device__ __forceinline__ void Parts(const Raw& r, const Lane& ln, const Staged& x, int b, int* s1,
                                               int*, float* d, float*) {
    *d = HalfBits(r.d);
    const int8_t* xp = x.q + b * 32;
    int acc = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int4 l0 = h == 0 ? r.la0 : r.lb0, l1 = h == 0 ? r.la1 : r.lb1;
      const int4 q0 =
          Q6Values(And(Shr(l0, ln.shift), 0x0F0F0F0F), And(Shr(r.h0, 2 * (ln.k + h)), 0x03030303));
      const int4 q1 =
          Q6Values(And(Shr(l1, ln.shift), 0x0F0F0F0F), And(Shr(r.h1, 2 * (ln.k + h)), 0x03030303));
      const int lo = static_cast<int8_t>((r.sc >> (16 * h)) & 0xFF);
      const int hi = static_cast<int8_t>((r.sc >> (16 * h + 8)) & 0xFF);
      acc += lo * Dot16(q0, Shared16(xp + 32 * h)) + hi * Dot16(q1, Shared16(xp + 32 * h + 16));
    }
    *s1 = acc;
  }
  static __device__ __forceinline__ float SegTerm(int s1, int, float d, float, float dx) {
    return Q6_KSegTerm(s1, d, dx);
  }
  static __device__ __forceinline__ int64_t RowBytes(int nb) { return nb / 8 * 208; }
  static __device__ __forceinline__ int64_t ScaleBytes(int nb) { return nb / 8 * 2; }
};

// Bytes of shared memory for an activation row of cols: the int8 values (rounded up to 16), a float and
// an int per block.
__host__ __device__ constexpr int StagedBytes(int cols) { return (cols + 15) / 16 * 16 + cols / 32 * 8; }

// The asynchronous form's shared memory: a warp's stage (a round's bytes, F's Copy and Read), and the
// block's whole, the activations then kStages stages a warp.
template <class F>
__host__ __device__ constexpr int StageBytes() {
  return (F::kChunks + (F::kWords > 0 ? 1 : 0)) * 512;
}
template <class F, int kStages>
__host__ __device__ constexpr int SharedBytes(int cols) {
  return kStages == 0 ? StagedBytes(cols)
                      : (StagedBytes(cols) + 15) / 16 * 16 + kWarps * kStages * StageBytes<F>();
}

// kW warps per row (1, 2 or 4; more than 1 only for rows of four pieces): warp w of a block takes row
// slot w / kW and, of that row, pieces [(w % kW) 4 / kW, (w % kW + 1) 4 / kW); its pieces' sums go
// through shared memory and one lane adds the row's four in order, as a warp with the whole row does.
//
// `ahead` (at least 1): a warp's rows are prefetched to L2 that many of its rows before it computes them,
// the first `ahead` before the wait for the previous kernel. Bytes in flight are what a short row's
// product is bound by: with one row ahead, a warp has the one row it fetches into registers in flight.
//
// kStages > 0 (the asynchronous form): a warp's rounds, row after row, are copied into a ring of kStages
// stages in shared memory by cp.async, kStages - 1 rounds ahead of the one computed, instead of one
// round ahead into registers; the first copies are issued before the wait for the previous kernel
// (weights no kernel writes). A lane reads back only what it copied itself, so waiting for its own copy
// groups is all the synchronization it needs; a stage is copied into again only after the values read
// from it were used. The same Raw, so the same terms in the same order: the same bits.
template <class F, int kW, int kExtra, int kStages>
__global__ void __launch_bounds__(kWarps * 32, F::kMinBlocks + kExtra)
    MatVecRowsKernel(MatVecJob job, Q8Act xq, int total_rows, int ahead) {
  static_assert(kW == 1 || kW == 2 || kW == 4, "a row's four pieces split evenly among its warps");
  constexpr int kSlots = kWarps / kW;  // rows a block computes at once
  extern __shared__ __align__(16) uint8_t staged_bytes[];
  __shared__ __align__(16) float seg_all[kWarps][2][8];  // a round's eight segment sums, rounds alternating
  __shared__ float piece_all[2][kSlots][4];              // kW > 1: the rows' piece sums, rows alternating
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  const int slot = warp / kW, part = warp % kW;
  const int cols = static_cast<int>(job.w[0].cols), nb = cols / 32, ng = (nb + 7) / 8;
  const int j2 = 2 * (lane & 3), gl = lane >> 2;
  const int stride = static_cast<int>(gridDim.x) * kSlots;
  int row = static_cast<int>(blockIdx.x) * kSlots + slot;

  // This warp's segments of a row, [seg0, seg0 + len), and where the pieces after its first begin
  // (qblock.cuh; QuantPieces is 1 or 4, and 4 wherever kW > 1); past its last piece, never.
  const int pieces = QuantPieces(cols), first = part * (pieces / kW), mine = pieces / kW;
  const int seg0 = static_cast<int>(PieceBegin(ng, pieces, first));
  const int len = static_cast<int>(PieceBegin(ng, pieces, first + mine)) - seg0;
  const int rounds = (len + 7) / 8;
  const int begin1 = mine > 1 ? static_cast<int>(PieceBegin(ng, pieces, first + 1)) : INT_MAX;
  const int begin2 = mine > 2 ? static_cast<int>(PieceBegin(ng, pieces, first + 2)) : INT_MAX;
  const int begin3 = mine > 3 ? static_cast<int>(PieceBegin(ng, pieces, first + 3)) : INT_MAX;

  // Row `r` of the job: matrix k, its row o (r < total_rows).
  auto locate = [&](int r, int* k, int* o) {
    int kk = 0;
    while (kk + 1 < job.count && r >= job.w[kk].rows) r -= static_cast<int>(job.w[kk++].rows);
    *k = kk;
    *o = r;
  };
  auto prefetch = [&](int k, int o) {  // weights no kernel writes: may run before the wait
    if (part != 0) return;             // the row's first warp prefetches all of it
    const int64_t bytes = F::RowBytes(nb), sbytes = F::ScaleBytes(nb);
    const uint8_t* p = job.w[k].q + o * bytes;
    for (int off = lane * 128; off < bytes; off += 32 * 128) PrefetchL2(p + off);
    const auto* ps = reinterpret_cast<const uint8_t*>(job.w[k].d) + o * sbytes;
    for (int off = lane * 128; off < sbytes; off += 32 * 128) PrefetchL2(ps + off);
  };
  auto prefetch_row = [&](int r) {
    if (r >= total_rows) return;
    int pk = 0, po = 0;
    locate(r, &pk, &po);
    prefetch(pk, po);
  };
  int k = 0, o = 0;
  if (row < total_rows) {
    locate(row, &k, &o);
    prefetch(k, o);
    for (int i = 1; i < ahead; ++i) prefetch_row(row + i * stride);
  }

  // The asynchronous form's producer: the next round to copy (row prow, round pr) and its stage ps.
  constexpr int kStageBytes = kStages > 0 ? StageBytes<F>() : 0;
  uint8_t* stages =
      staged_bytes + (StagedBytes(cols) + 15) / 16 * 16 + warp * (kStages * kStageBytes) + lane * 16;
  int prow = row, pr = 0, ps = 0, cs = 0;
  typename F::At pat{};
  auto produce = [&] {
    if (prow < total_rows && 8 * pr + gl < len)
      F::Copy(pat, pr, seg0 + 8 * pr + gl, j2, nb, stages + ps * kStageBytes);
    CopyCommit();
    ps = ps + 1 == kStages ? 0 : ps + 1;
    if (prow < total_rows && ++pr == rounds) {
      pr = 0;
      prow += stride;
      if (prow < total_rows) {
        int pk = 0, po = 0;
        locate(prow, &pk, &po);
        pat = F::Start(job.w[pk], po, seg0 + gl, j2, nb);
      }
    }
  };
  if constexpr (kStages > 0) {
    if (row < total_rows) pat = F::Start(job.w[k], o, seg0 + gl, j2, nb);
#pragma unroll 1
    for (int i = 0; i + 1 < kStages; ++i) produce();
  }
  AfterPrevious();

  // The activations, once per block.
  auto* sq = reinterpret_cast<int8_t*>(staged_bytes);
  auto* sd = reinterpret_cast<float*>(staged_bytes + (cols + 15) / 16 * 16);
  int* ss = reinterpret_cast<int*>(sd + nb);
  for (int i = static_cast<int>(threadIdx.x) * 16; i < cols; i += kWarps * 32 * 16)
    *reinterpret_cast<int4*>(sq + i) = Load16(xq.q + i);
  for (int b = static_cast<int>(threadIdx.x); b < nb; b += kWarps * 32) {
    sd[b] = __ldg(xq.d + b);
    ss[b] = Sum16(Load16(xq.q + 32 * b)) + Sum16(Load16(xq.q + 32 * b + 16));
  }
  __syncthreads();
  // With kW > 1 every warp of a block runs the loop as often as the block's first slot (the barriers
  // must match); a warp whose slot is past the last row computes nothing.
  if (kW == 1 ? row >= total_rows : row - slot >= total_rows) return;
  const Staged x{sq, sd, ss};

  const typename F::Lane fl = F::LaneOf(j2);
  typename F::At at = F::Start(job.w[k], o, seg0 + gl, j2, nb);
  typename F::Raw cur{};
  if (kStages == 0 && row < total_rows && gl < len) cur = F::Fetch(at, 0, seg0 + gl, j2, nb);
  int parity = 0, turn = 0;
  while (true) {
    // The warp's next row: where it is, its weights to L2 now, its first round fetched in this row's last.
    const int nrow = row + stride;
    int nk = 0, no = 0;
    typename F::At nat{};
    if (nrow < total_rows) {
      locate(nrow, &nk, &no);
      if (ahead == 1) prefetch(nk, no);  // the row found just now: no second search
      nat = F::Start(job.w[nk], no, seg0 + gl, j2, nb);
    }
    if (ahead > 1) prefetch_row(row + ahead * stride);
    float* piece_sum = piece_all[turn][slot];
    float acc = 0.0f, total = 0.0f;
    int p = 0, end = begin1, end2 = begin2, end3 = begin3;
    for (int r = 0; r < rounds && row < total_rows; ++r) {
      const int g = seg0 + 8 * r + gl;  // the lane's segment
      typename F::Raw nxt{};
      if constexpr (kStages > 0) {
        produce();
        CopyWait<kStages - 1>();
        cur = F::Read(stages + cs * kStageBytes, at);
        cs = cs + 1 == kStages ? 0 : cs + 1;
      } else if (r + 1 < rounds) {
        if (8 * (r + 1) + gl < len) nxt = F::Fetch(at, r + 1, g + 8, j2, nb);
      } else if (nrow < total_rows && gl < len) {
        nxt = F::Fetch(nat, 0, seg0 + gl, j2, nb);
      }
      float v;
      if constexpr (F::kSegInt) {
        int s1 = 0, s2 = 0;
        float d = 0.0f, dmin = 0.0f;
        const bool on = 8 * r + gl < len;
        if (on) F::Parts(cur, fl, x, 8 * g + j2, &s1, &s2, &d, &dmin);
        s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
        s2 += __shfl_xor_sync(0xffffffffu, s2, 1);
        s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
        s2 += __shfl_xor_sync(0xffffffffu, s2, 2);
        v = on ? F::SegTerm(s1, s2, d, dmin, x.d[8 * g]) : 0.0f;
      } else {
        float t0 = 0.0f, t1 = 0.0f;
        if (8 * r + gl < len) F::Terms(cur, fl, x, 8 * g + j2, nb, &t0, &t1);
        v = __fadd_rn(t0, t1);
        v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
        v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
      }
      // The round's segment sums (lane 4s holds segment s) through shared memory, added in order.
      float* seg = seg_all[warp][parity];
      parity ^= 1;
      if ((lane & 3) == 0) seg[gl] = v;
      __syncwarp();
      const float4 s0 = *reinterpret_cast<const float4*>(seg), s1 = *reinterpret_cast<const float4*>(seg + 4);
      const float sums[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
      const int g0 = seg0 + 8 * r;
      if (8 * r + 8 <= len && end >= g0 + 8) {  // no piece begins inside the round, and it is whole
#pragma unroll
        for (int s = 0; s < 8; ++s) acc = __fadd_rn(acc, sums[s]);
      } else {
#pragma unroll
        for (int s = 0; s < 8; ++s) {
          if (8 * r + s >= len) break;
          if (g0 + s == end) {
            if (kW == 1) {
              total = p == 0 ? acc : __fadd_rn(total, acc);
            } else if (lane == 0) {
              piece_sum[first + p] = acc;
            }
            acc = 0.0f;
            ++p;
            end = end2;
            end2 = end3;
            end3 = INT_MAX;
          }
          acc = __fadd_rn(acc, sums[s]);
        }
      }
      if constexpr (kStages == 0) cur = nxt;
    }
    if constexpr (kW == 1) {
      total = p == 0 ? acc : __fadd_rn(total, acc);
      if (lane == 0) StoreResult(job.out[k], 0, o, total);
      if (nrow >= total_rows) break;
    } else {
      if (lane == 0) piece_sum[first + p] = acc;
      __syncthreads();  // the row's pieces are in; the other turn's were read before this barrier
      if (part == 0 && lane == 0 && row < total_rows) {
        total = piece_sum[0];
        for (int q = 1; q < 4; ++q) total = __fadd_rn(total, piece_sum[q]);
        StoreResult(job.out[k], 0, o, total);
      }
      turn ^= 1;
      if (nrow - slot >= total_rows) break;
    }
    row = nrow;
    k = nk;
    o = no;
    at = nat;
  }
}

// Blocks of the kernel one multiprocessor holds with the activations of `cols` staged: asked of the
// occupancy API once per width (MatVecRowsTakes and the launch both need it).
template <class F, int kW, int kExtra, int kStages>
int BlocksPerSm(int cols) {
  static std::mutex mu;
  static std::map<int, int> known;
  const std::lock_guard<std::mutex> lock(mu);
  const auto it = known.find(cols);
  if (it != known.end()) return it->second;
  if (known.empty() && SharedBytes<F, kStages>(kMatVecRowsMaxCols) > 48 * 1024) {  // once, before any launch
    cudaFuncSetAttribute(MatVecRowsKernel<F, kW, kExtra, kStages>,
                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                         SharedBytes<F, kStages>(kMatVecRowsMaxCols));
  }
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, MatVecRowsKernel<F, kW, kExtra, kStages>,
                                                    kWarps * 32,
                                                    SharedBytes<F, kStages>(cols)) != cudaSuccess) {
    cudaGetLastError();
    per_sm = 1;
  }
  return known[cols] = std::max(1, per_sm);
}

// Resident warps of the format's kernel for rows of `cols`.
template <class F, int kW = 1, int kExtra = 0, int kStages = 0>
int64_t ResidentWarps(int cols) {
  return int64_t{kWarps} * BlocksPerSm<F, kW, kExtra, kStages>(cols) * std::max(1, MultiprocessorCount());
}

int WarpsPerRow(int64_t rows, int64_t cols, int64_t resident);  // below

// How many of its rows ahead a warp prefetches to L2 (the kernel's `ahead`). FAK_CUDA_MATVEC_AHEAD=N
// sets it (1 to 16).
int RowsAhead() {
  if (const char* v = std::getenv("FAK_CUDA_MATVEC_AHEAD"); v != nullptr && v[0] != '\0') {
    return std::clamp(std::atoi(v), 1, 16);
  }
  return 1;
}

// Stages of the asynchronous form (MatVecRowsKernel): FAK_CUDA_MATVEC_ASYNC=3 or 5; 0 (the default), the
// register form.
int AsyncStages() {
  if (const char* v = std::getenv("FAK_CUDA_MATVEC_ASYNC"); v != nullptr && v[0] != '\0') {
    const int n = std::atoi(v);
    return n <= 0 ? 0 : n <= 3 ? 3 : 5;
  }
  return 0;
}

template <class F, int kW, int kExtra, int kStages>
cudaError_t LaunchRowsW(const MatVecJob& job, Q8Act xq, int64_t rows, cudaStream_t s) {
  const int cols = static_cast<int>(job.w[0].cols);
  constexpr int kSlots = kWarps / kW;
  const int64_t blocks =
      std::min((rows + kSlots - 1) / kSlots, ResidentWarps<F, kW, kExtra, kStages>(cols) / kWarps);
  return Launch(MatVecRowsKernel<F, kW, kExtra, kStages>, dim3(static_cast<unsigned>(blocks)), kWarps * 32,
                SharedBytes<F, kStages>(cols), s, job, xq, static_cast<int>(rows), RowsAhead());
}

template <class F, int kStages>
cudaError_t LaunchRowsS(const MatVecJob& job, Q8Act xq, int64_t rows, int warps_per_row, cudaStream_t s) {
  switch (warps_per_row) {
    case 4: return LaunchRowsW<F, 4, 0, kStages>(job, xq, rows, s);
    case 2: return LaunchRowsW<F, 2, 0, kStages>(job, xq, rows, s);
    default: {
      const char* v = std::getenv("FAK_CUDA_MATVEC_OCC");  // one block more a multiprocessor
      return v != nullptr && v[0] == '1' ? LaunchRowsW<F, 1, 1, kStages>(job, xq, rows, s)
                                         : LaunchRowsW<F, 1, 0, kStages>(job, xq, rows, s);
    }
  }
}

template <class F>
cudaError_t LaunchRows(const MatVecJob& job, Q8Act xq, cudaStream_t s) {
  const int cols = static_cast<int>(job.w[0].cols);
  int64_t rows = 0;
  for (int k = 0; k < job.count; ++k) rows += job.w[k].rows;
  const int warps_per_row = WarpsPerRow(rows, cols, ResidentWarps<F>(cols));
  // Q8_0's two block scales are copied as one aligned word: rows of an even number of blocks.
  const int stages = std::is_same_v<F, RowsQ8_0> && cols / 32 % 2 != 0 ? 0 : AsyncStages();
  switch (stages) {
    case 3: return LaunchRowsS<F, 3>(job, xq, rows, warps_per_row, s);
    case 5: return LaunchRowsS<F, 5>(job, xq, rows, warps_per_row, s);
    default: return LaunchRowsS<F, 0>(job, xq, rows, warps_per_row, s);
  }
}

// Rows of four pieces (QuantPieces) get four warps each, a piece per warp, when there are fewer rows
// than twice the resident warps: a warp's rounds run one after another, so a few long rows are otherwise
// a few long chains. Measured on an H100 (GB/s, whole-row kernel with one, two and four warps per row):
// 7B down Q4_K 1,788 / 1,686 / 1,923, Q8_0 1,615 / 1,900 / 2,342; 27B down Q4_K 1,451 / 1,807 / 1,967;
// and with many rows one warp per row (27B gate/up Q4_K 2,449 / 1,935 / 1,677).
// FAK_CUDA_MATVEC_SPLIT=1, 2 or 4 sets it (rows of four pieces only).
int WarpsPerRow(int64_t rows, int64_t cols, int64_t resident) {
  if (QuantPieces(cols) != 4) return 1;
  if (const char* v = std::getenv("FAK_CUDA_MATVEC_SPLIT"); v != nullptr && v[0] != '\0') {
    const int n = std::atoi(v);
    return n == 2 || n == 4 ? n : 1;
  }
  return rows >= 2 * resident ? 1 : 4;
}

}  // namespace

// Where it pays, measured on an H100 (fak bench kernels --backend cuda, 2026-12-06, docs/bench/gpu.md):
// Q4_K on every shape (the previous kernel's 4-bit unpacking made it bound by instruction issue: 27B
// gate/up 2.45 against 1.12 TB/s, 7B down 1.92 against 1.25, 1.5B q/k/v 0.60 against 0.60); Q8_0 and
// Q6_K with at least as many rows as resident warps (7B down at Q8_0 2.34 against 1.85 with four warps
// a row, 1.5B gate/up 2.35 against 2.07, 7B q/k/v 2.08 against 1.81). With fewer rows (the 1.5B
// geometry's q/k/v, o and down: 0.99 against 1.11, 0.79 against 0.91, 1.58 against 1.83 at Q8_0) the
// previous kernel's four warps on each row of a grid of short rows win.
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
  if (always || job.w[0].format == MatFormat::kQ4_K) return true;
  const int c = static_cast<int>(cols);
  switch (job.w[0].format) {
    case MatFormat::kQ8_0: return rows >= ResidentWarps<RowsQ8_0>(c);
    case MatFormat::kQ6_K: return rows >= ResidentWarps<RowsQ6_K>(c);
    default: return false;
  }
}

cudaError_t MatVecRows(const MatVecJob& job, Q8Act xq, cudaStream_t stream) {
  if (GroupFor(job.w[0].format) == kKQuantGroup && xq.group != kKQuantGroup) return cudaErrorInvalidValue;
  switch (job.w[0].format) {
    case MatFormat::kQ8_0: return LaunchRows<RowsQ8_0>(job, xq, stream);
    case MatFormat::kQ4_K: return LaunchRows<RowsQ4_K>(job, xq, stream);
    case MatFormat::kQ6_K: return LaunchRows<RowsQ6_K>(job, xq, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace fak::cuda
