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

#include "backends/cuda/kernels.h"
#include "backends/cuda/pdl.cuh"
#include "backends/cuda/qblock.cuh"

namespace fak::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRoundSegments = 8;  // the segments a warp sums in one round (four lanes each)

// The activation row in shared memory: q (cols int8), d (nb block scales), s (nb block sums).
struct Staged {
  const int8_t* q;
  const float* d;
  const int* s;
};

__device__ __forceinline__ int4 Shared16(const int8_t* p) { return *reinterpret_cast<const int4*>(p); }

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
  // Blocks a multiprocessor holds (the launch bounds: registers at most 96 a thread), with one warp a
  // row and with several.
  static constexpr int kMinBlocksWhole = 5, kMinBlocks = 5;
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
  static constexpr int kMinBlocksWhole = 8, kMinBlocks = 7;  // registers: at most 64 and 72
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
  // Registers: at most 102 with one warp a row (10 bytes spilled), 128 with several.
  static constexpr int kMinBlocksWhole = 5, kMinBlocks = 4;
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

// kW warps per row (1, 2 or 4; more than 1 only for rows of four pieces): warp w of a block takes row
// slot w / kW and, of that row, pieces [(w % kW) 4 / kW, (w % kW + 1) 4 / kW); its pieces' sums go
// through shared memory and one lane adds the row's four in order, as a warp with the whole row does.
//
// A warp's row is prefetched to L2 before the wait for the previous kernel, and its next row as it
// begins one. One warp a row has one block more a multiprocessor than several (kMinBlocksWhole): for
// Q4_K and Q6_K that was up to 10% faster on an H100 (docs/bench/gpu.md, 2026-12-07), for Q8_0 up to 7%
// slower. Prefetching rows further ahead, and copying rounds ahead into shared memory with cp.async
// instead of into registers, were measured too and were slower everywhere.
template <class F, int kW>
__global__ void __launch_bounds__(kWarps * 32, kW == 1 ? F::kMinBlocksWhole : F::kMinBlocks)
    MatVecRowsKernel(MatVecJob job, Q8Act xq, int total_rows) {
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
  int k = 0, o = 0;
  if (row < total_rows) {
    locate(row, &k, &o);
    prefetch(k, o);
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
  if (row < total_rows && gl < len) cur = F::Fetch(at, 0, seg0 + gl, j2, nb);
  int parity = 0, turn = 0;
  while (true) {
    // The warp's next row: where it is, its weights to L2 now, its first round fetched in this row's last.
    const int nrow = row + stride;
    int nk = 0, no = 0;
    typename F::At nat{};
    if (nrow < total_rows) {
      locate(nrow, &nk, &no);
      prefetch(nk, no);
      nat = F::Start(job.w[nk], no, seg0 + gl, j2, nb);
    }
    float* piece_sum = piece_all[turn][slot];
    float acc = 0.0f, total = 0.0f;
    int p = 0, end = begin1, end2 = begin2, end3 = begin3;
    for (int r = 0; r < rounds && row < total_rows; ++r) {
      const int g = seg0 + 8 * r + gl;  // the lane's segment
      typename F::Raw nxt{};
      if (r + 1 < rounds) {
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
      cur = nxt;
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
template <class F, int kW>
int BlocksPerSm(int cols) {
  static std::mutex mu;
  static std::map<int, int> known;
  const std::lock_guard<std::mutex> lock(mu);
  const auto it = known.find(cols);
  if (it != known.end()) return it->second;
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, MatVecRowsKernel<F, kW>, kWarps * 32,
                                                    StagedBytes(cols)) != cudaSuccess) {
    cudaGetLastError();
    per_sm = 1;
  }
  return known[cols] = std::max(1, per_sm);
}

// Resident warps of the format's kernel for rows of `cols`.
template <class F, int kW = 1>
int64_t ResidentWarps(int cols) {
  return int64_t{kWarps} * BlocksPerSm<F, kW>(cols) * std::max(1, MultiprocessorCount());
}

int WarpsPerRow(int64_t rows, int64_t cols, int64_t resident);  // below

template <class F, int kW>
cudaError_t LaunchRowsW(const MatVecJob& job, Q8Act xq, int64_t rows, cudaStream_t s) {
  const int cols = static_cast<int>(job.w[0].cols);
  constexpr int kSlots = kWarps / kW;
  const int64_t blocks = std::min((rows + kSlots - 1) / kSlots, ResidentWarps<F, kW>(cols) / kWarps);
  return Launch(MatVecRowsKernel<F, kW>, dim3(static_cast<unsigned>(blocks)), kWarps * 32, StagedBytes(cols),
                s, job, xq, static_cast<int>(rows));
}

template <class F>
cudaError_t LaunchRows(const MatVecJob& job, Q8Act xq, cudaStream_t s) {
  const int cols = static_cast<int>(job.w[0].cols);
  int64_t rows = 0;
  for (int k = 0; k < job.count; ++k) rows += job.w[k].rows;
  switch (WarpsPerRow(rows, cols, ResidentWarps<F>(cols))) {
    case 4: return LaunchRowsW<F, 4>(job, xq, rows, s);
    case 2: return LaunchRowsW<F, 2>(job, xq, rows, s);
    default: return LaunchRowsW<F, 1>(job, xq, rows, s);
  }
}

// Rows of four pieces (QuantPieces) get four warps each, a piece per warp, when there are fewer rows
// than twice the resident warps and each piece is at least one round of eight segments: a warp's rounds
// run one after another, so a few long rows are otherwise a few long chains. Measured on an H100 (GB/s,
// whole-row kernel with one, two and four warps per row): 7B down Q4_K 1,788 / 1,686 / 1,923, Q8_0 1,615
// / 1,900 / 2,342; 27B down Q4_K 1,451 / 1,807 / 1,967; and with many rows one warp per row (27B gate/up
// Q4_K 2,449 / 1,935 / 1,677). Rows of 20-24 segments (the 27B's 5,120- and 6,144-wide products with
// fewer rows, the 2B's down projection) left a quarter of each warp's lanes idle with four: one warp a
// row took 0.85x the time at the 27B output projection in Q6_K, 0.86x at its v projection in Q4_K,
// 0.95x at the 2B down projection and the 27B k projection, 0.96x at the DeltaNet's z, b and a (us,
// 2026-12-07, call 25). Rows of 16-19 and 25-31 segments (4,096-8,191 columns) follow the same rule
// unmeasured. FAK_CUDA_MATVEC_SPLIT=1, 2 or 4 sets it (rows of four pieces only).
int WarpsPerRow(int64_t rows, int64_t cols, int64_t resident) {
  if (QuantPieces(cols) != 4) return 1;
  if (const char* v = std::getenv("FAK_CUDA_MATVEC_SPLIT"); v != nullptr && v[0] != '\0') {
    const int n = std::atoi(v);
    return n == 2 || n == 4 ? n : 1;
  }
  return rows < 2 * resident && QuantSegments(cols) >= 4 * kRoundSegments ? 4 : 1;
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
