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
// two stages and one barrier a segment (s + 1's copies go out past the barrier that ends every warp's
// use of s - 1's stage; with a second barrier at the end of each segment Q8_0 ran 4-10% slower at 512
// rows on an H100, the K-quants 0-1%); the few scales per segment come through registers. The mma
// operands come out of shared memory by ldmatrix, already in the registers the mma reads (Q4_K: its raw
// nibble bytes, masked after), and row strides are 16 bytes past a multiple of 128 so its eight rows
// meet no bank conflict.
//
// Napkin math (pp512, 1.5B geometry): 1.3 G multiply-adds per token, in 32-weight blocks: 20 M blocks
// per token. Q8_0 spends ~5 instructions a block and output on its term (mma a small part): ~2.3 ms for
// the 512 tokens' matrices at 4 warp-instructions per clock per SM on 132 SMs at 1.98 GHz, the floor of
// that design; the K-quants' integer sums take that to ~1.5 a block and output.
#include <cstdlib>
#include <type_traits>

#include "backends/cuda/gemm_tiles.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/pdl.cuh"
#include "backends/cuda/qblock.cuh"

namespace fak::cuda {
namespace gemm {
namespace {

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
// With kPieces > 1 and !kSplit, the sum of the closed pieces waits in shared memory rather than in
// registers: it changes four times a kernel, and the registers are the ones the segment loop spilled
// (ptxas, 8 warps: Q4_K 64 -> 28 bytes, Q6_K 80 -> 36, Q8_0 28 -> 4; 4 warps: Q6_K 0, Q4_K 104 -> 4, Q8_0
// 104 -> 0). At 512 rows on an H100 the same bits came 1-11% faster at the 27B shapes (docs/bench/gpu.md,
// calls 22 and 23), and the 27B hybrid's pp512 4-5% faster end to end.
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
  constexpr bool kPieceSums = kPieces > 1 && !kSplit;
  // Output (i, j, e)'s closed pieces for thread tid, past the stages: consecutive threads, consecutive words.
  float* const shared_total = reinterpret_cast<float*>(smem + 2 * sizeof(Stage<F>)) + threadIdx.x;
  auto close_piece = [&](int p) {
#pragma unroll
    for (int i = 0; i < kI; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float& t = shared_total[((i * 4 + j) * 4 + e) * kThreads];
          t = p == 0 ? piece[i][j][e] : __fadd_rn(t, piece[i][j][e]);
          piece[i][j][e] = 0.0f;
        }
      }
    }
  };

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
    // Segment seg's copies are the only ones in flight. Past the barrier every warp is done with segment
    // seg - 1, so its stage (next) takes segment seg + 1 without a second barrier.
    CopyWait<0>();
    __syncthreads();
    if (more) {
      F::Issue(next.w, wplan, w, seg + 1);
      IssueInt8(next.x.q, xplan, xq.q, w.cols, seg + 1);
      CopyCommit();
      ws.Load(w, o0, seg + 1, tid);
      xs.Load(xq, w.cols, n, r0, seg + 1, tid);
    }
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
  }
  if constexpr (kPieceSums) {
    for (; p < kPieces; ++p) close_piece(p);
#pragma unroll
    for (int i = 0; i < kI; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) total[i][j][e] = shared_total[((i * 4 + j) * 4 + e) * kThreads];
      }
    }
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
  constexpr bool kPieceSums = kPieces > 1 && !kSplit;  // the closed pieces' sum in shared memory
  constexpr int kBytes = 2 * sizeof(Stage<F>) + (kPieceSums ? kSub<F> * 16 * F::kThreads * 4 : 0);
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
// this form). Since the closed pieces' sum moved to shared memory, Q6_K with 4 warps fits its 255
// registers without spilling (it spilled with it in registers) and measured 8-11% faster than with 8 at the
// 27B shapes (2026-12-07, call 22, H100; rows of four pieces), 2% slower at the 1.5B gate/up (one piece);
// Q4_K and Q8_0 were slower with 4 at every shape. So Q6_K rows of four pieces take 4 warps in prompt-sized
// products (256 activation rows or more: 512 is what was measured; smaller batches run on smaller grids,
// often a piece per block, and keep 8 until measured), everything else 8. Grids of less than a wave
// gain from 4 too (call 26: the 2B hybrid's down projection, 256 tiles, 89-91 us against 94-95 with 8;
// the 1.5B's, 192 tiles, 127 against 132; the 7B's 523 against 560). FAK_CUDA_GEMM_WARPS=4 or 8 sets
// every product.
int GemmWarps(MatFormat format, int64_t cols, int64_t n) {
  const char* v = std::getenv("FAK_CUDA_GEMM_WARPS");
  if (v != nullptr && v[0] != '\0') return std::atoi(v) == 8 ? 8 : 4;
  return format == MatFormat::kQ6_K && QuantPieces(cols) > 1 && n >= 256 ? 4 : 8;
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
}  // namespace gemm

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
  return gemm::GemmWarps(job.w[0].format, job.w[0].cols, n) == 8
             ? gemm::LaunchFormat<256>(job, xq, n, stream)
             : gemm::LaunchFormat<128>(job, xq, n, stream);
}

}  // namespace fak::cuda
