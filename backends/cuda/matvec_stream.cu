// The one-row product of the quantized formats (decode) as a stream: each warp walks a run of rows
// (rows w, w + W, w + 2W, ... of the job's matrices for warp w of W) step after step, a step being one
// round of qblock.cuh's order (four segments of a piece, lane l on block l % 8 of segment l / 8), and
// fetches the next step's weights, activations and scales into registers before it computes the
// current one, so a warp has loads in flight from its first step to its last instead of issuing a
// row's loads and waiting on them. The grid is as many blocks as the GPU holds at once.
//
// A row's terms are qblock.cuh's (the Term functions of matvec.cu's formats, fed the same bytes) and
// are added in its order (the segment tree by a butterfly over 8 lanes, the segments of a piece in
// order from +0, the pieces in order), so a row's result is the same bits as MatVec's other forms
// and the GEMM's.
//
// FAK_CUDA_MATVEC_STREAM=1 (one activation row, no tail): off by default until measured.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>

#include "backends/cuda/kernels.h"
#include "backends/cuda/pdl.cuh"
#include "backends/cuda/qblock.cuh"

namespace fak::cuda {
namespace {

constexpr int kWarps = 4;

// What one lane reads for block b of row o: Fetch issues the loads, Term computes from them.
struct StreamQ8_0 {
  struct Raw {
    int4 w0, w1;
    uint16_t dw;
  };
  static __device__ __forceinline__ Raw Fetch(const DeviceMatrix& w, int64_t o, int64_t b) {
    const uint8_t* wp = w.q + o * w.cols + b * 32;
    return Raw{Load16(wp), Load16(wp + 16), __ldg(w.d + o * (w.cols / 32) + b)};
  }
  static __device__ __forceinline__ float Term(const Raw& r, Q8Act x, int64_t b) {
    const int8_t* xp = x.q + b * 32;
    return Q8_0Term(Dot16(r.w0, Load16(xp)) + Dot16(r.w1, Load16(xp + 16)) + kExactBias, HalfBits(r.dw),
                    __ldg(x.d + b));
  }
  static __device__ int64_t RowBytes(int64_t cols) { return cols; }
  static __device__ int64_t ScaleBytes(int64_t cols) { return cols / 32 * 2; }
};

struct StreamQ4_K {
  struct Raw {
    int4 head, n0, n1;
  };
  static __device__ __forceinline__ Raw Fetch(const DeviceMatrix& w, int64_t o, int64_t b) {
    const int j = static_cast<int>(b & 7) >> 1;
    const uint8_t* blk = w.q + (o * (w.cols / 256) + (b >> 3)) * 144;
    return Raw{Load16(blk), Load16(blk + 16 + 32 * j), Load16(blk + 32 + 32 * j)};
  }
  static __device__ __forceinline__ float Term(const Raw& r, Q8Act x, int64_t b) {
    const int s = static_cast<int>(b & 7), shift = 4 * (s & 1);
    const int4 n0 = And(Shr(r.n0, shift), 0x0F0F0F0F), n1 = And(Shr(r.n1, shift), 0x0F0F0F0F);
    // Byte i of the 12 packed scale bytes (the header's words y, z, w), from registers.
    auto sc = [&](int i) {
      const unsigned word = static_cast<unsigned>(i < 4 ? r.head.y : i < 8 ? r.head.z : r.head.w);
      return static_cast<int>((word >> (8 * (i & 3))) & 0xFF);
    };
    int scale, min;
    if (s < 4) {
      scale = sc(s) & 63;
      min = sc(s + 4) & 63;
    } else {
      scale = (sc(s + 4) & 0xF) | ((sc(s - 4) >> 6) << 4);
      min = (sc(s + 4) >> 4) | ((sc(s) >> 6) << 4);
    }
    const float ds = __fmul_rn(HalfBits(static_cast<uint16_t>(r.head.x & 0xFFFF)), static_cast<float>(scale));
    const float dm = __fmul_rn(HalfBits(static_cast<uint16_t>(static_cast<unsigned>(r.head.x) >> 16)),
                               static_cast<float>(min));
    const int8_t* xp = x.q + b * 32;
    const int4 x0 = Load16(xp), x1 = Load16(xp + 16);
    return Q4_KTerm(Dot16(n0, x0) + Dot16(n1, x1) + kExactBias, ExactFloat(Sum16(x0) + Sum16(x1)), ds, dm,
                    __ldg(x.d + b));
  }
  static __device__ int64_t RowBytes(int64_t cols) { return cols / 256 * 144; }
  static __device__ int64_t ScaleBytes(int64_t) { return 0; }
};

struct StreamQ6_K {
  struct Raw {
    int4 ql0, ql1, qh0, qh1;
    uint16_t sc, d;
  };
  static __device__ __forceinline__ Raw Fetch(const DeviceMatrix& w, int64_t o, int64_t b) {
    const int64_t sb = o * (w.cols / 256) + (b >> 3);
    const int s = static_cast<int>(b & 7), n = s >> 2, k = s & 3;
    const uint8_t* blk = w.q + sb * 208;
    const uint8_t* ql = blk + 64 * n + 32 * (k & 1);
    const uint8_t* qh = blk + 128 + 32 * n;
    return Raw{Load16(ql),
               Load16(ql + 16),
               Load16(qh),
               Load16(qh + 16),
               __ldg(reinterpret_cast<const uint16_t*>(blk + 192 + 2 * s)),
               __ldg(w.d + sb)};
  }
  static __device__ __forceinline__ float Term(const Raw& r, Q8Act x, int64_t b) {
    const int k = static_cast<int>(b & 3), shift = k >= 2 ? 4 : 0;
    const int4 q0 = Q6Values(And(Shr(r.ql0, shift), 0x0F0F0F0F), And(Shr(r.qh0, 2 * k), 0x03030303));
    const int4 q1 = Q6Values(And(Shr(r.ql1, shift), 0x0F0F0F0F), And(Shr(r.qh1, 2 * k), 0x03030303));
    const float d = HalfBits(r.d);
    const auto lo = static_cast<int8_t>(r.sc & 0xFF), hi = static_cast<int8_t>(r.sc >> 8);
    const float d_lo = __fmul_rn(d, static_cast<float>(lo)), d_hi = __fmul_rn(d, static_cast<float>(hi));
    const int8_t* xp = x.q + b * 32;
    return Q6_KTerm(Dot16(q0, Load16(xp)) + kExactBias, Dot16(q1, Load16(xp + 16)) + kExactBias, d_lo, d_hi,
                    __ldg(x.d + b));
  }
  static __device__ int64_t RowBytes(int64_t cols) { return cols / 256 * 208; }
  static __device__ int64_t ScaleBytes(int64_t cols) { return cols / 256 * 2; }
};

// Where a warp's walk is: row `row` of the job (matrix k, its row o), piece p, round i of the piece.
struct Cursor {
  int64_t row, o;
  int k, p;
  int64_t i;
};

template <class F>
__global__ void __launch_bounds__(kWarps * 32)
    MatVecStreamKernel(MatVecJob job, Q8Act xq, int64_t total_rows) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int64_t tw = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int64_t cols = job.w[0].cols, nb = cols / 32, ng = QuantSegments(cols);
  const int pieces = QuantPieces(cols);
  auto piece_begin = [&](int p) { return PieceBegin(ng, pieces, p); };
  auto locate = [&](Cursor* c) {
    c->k = 0;
    c->o = c->row;
    while (c->k + 1 < job.count && c->o >= job.w[c->k].rows) c->o -= job.w[c->k++].rows;
  };
  // A row's weights and scales into L2 (weights no kernel writes): the first row before the wait,
  // then each next row while this one is computed, so a warp always has a row's bytes on the way.
  auto prefetch = [&](const Cursor& c) {
    if (c.row >= total_rows) return;
    const int64_t bytes = F::RowBytes(cols), sbytes = F::ScaleBytes(cols);
    const uint8_t* row = job.w[c.k].q + c.o * bytes;
    for (int64_t off = lane * 128; off < bytes; off += 32 * 128) PrefetchL2(row + off);
    const auto* scales = reinterpret_cast<const uint8_t*>(job.w[c.k].d) + c.o * sbytes;
    for (int64_t off = lane * 128; off < sbytes; off += 32 * 128) PrefetchL2(scales + off);
  };
  Cursor at{first, 0, 0, 0, 0};
  locate(&at);
  prefetch(at);
  AfterPrevious();
  if (at.row >= total_rows) return;

  auto fetch = [&](const Cursor& c, bool* valid) {
    const int64_t g = piece_begin(c.p) + 4 * c.i + (lane >> 3), b = g * kBlocksPerSegment + (lane & 7);
    *valid = c.row < total_rows && g < piece_begin(c.p + 1) && b < nb;
    return *valid ? F::Fetch(job.w[c.k], c.o, b) : typename F::Raw{};
  };
  auto advance = [&](Cursor* c) {
    if (piece_begin(c->p) + 4 * ++c->i < piece_begin(c->p + 1)) return;
    c->i = 0;
    if (++c->p < pieces) return;
    c->p = 0;
    c->row += tw;
    locate(c);
  };

  bool cur_valid = false;
  typename F::Raw cur = fetch(at, &cur_valid);
  Cursor next = at;
  advance(&next);
  float piece_sum = 0.0f, total = 0.0f;
  while (true) {
    if (at.p == 0 && at.i == 0) {  // a row begins: the warp's next row on its way to L2
      Cursor after{at.row + tw, 0, 0, 0, 0};
      locate(&after);
      prefetch(after);
    }
    bool next_valid = false;
    const typename F::Raw nxt = fetch(next, &next_valid);  // in flight while this step computes
    const int64_t g0 = piece_begin(at.p) + 4 * at.i, g_end = piece_begin(at.p + 1);
    float t = cur_valid ? F::Term(cur, xq, (g0 + (lane >> 3)) * kBlocksPerSegment + (lane & 7)) : 0.0f;
#pragma unroll
    for (int m = 1; m < 8; m <<= 1) t = __fadd_rn(t, __shfl_xor_sync(0xffffffffu, t, m));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float seg = __shfl_sync(0xffffffffu, t, 8 * k);
      if (g0 + k < g_end) piece_sum = __fadd_rn(piece_sum, seg);
    }
    if (g0 + 4 >= g_end) {  // the piece's last round
      total = at.p == 0 ? piece_sum : __fadd_rn(total, piece_sum);
      piece_sum = 0.0f;
      if (at.p + 1 == pieces) {
        if (lane == 0) StoreResult(job.out[at.k], 0, at.o, total);
        if (next.row >= total_rows) break;
      }
    }
    at = next;
    cur = nxt;
    cur_valid = next_valid;
    advance(&next);
  }
}

template <class F>
cudaError_t LaunchStream(const MatVecJob& job, Q8Act xq, cudaStream_t s) {
  static const int per_sm = [] {
    int n = 0;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, MatVecStreamKernel<F>, kWarps * 32, 0) ==
                   cudaSuccess
               ? n
               : 1;
  }();
  int64_t rows = 0;
  for (int k = 0; k < job.count; ++k) rows += job.w[k].rows;
  const int64_t resident = static_cast<int64_t>(std::max(1, per_sm)) * std::max(1, MultiprocessorCount());
  const int64_t blocks = std::min((rows + kWarps - 1) / kWarps, resident);
  return Launch(MatVecStreamKernel<F>, dim3(static_cast<unsigned>(blocks)), kWarps * 32, 0, s, job, xq, rows);
}

}  // namespace

bool MatVecStreamOn() {
  const char* v = std::getenv("FAK_CUDA_MATVEC_STREAM");
  return v != nullptr && v[0] == '1';
}

cudaError_t MatVecStream(const MatVecJob& job, Q8Act xq, cudaStream_t stream) {
  switch (job.w[0].format) {
    case MatFormat::kQ8_0: return LaunchStream<StreamQ8_0>(job, xq, stream);
    case MatFormat::kQ4_K: return LaunchStream<StreamQ4_K>(job, xq, stream);
    case MatFormat::kQ6_K: return LaunchStream<StreamQ6_K>(job, xq, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace fak::cuda
