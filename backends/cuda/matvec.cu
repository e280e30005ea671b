// Matrix times a few activation rows, one warp per output element row, for every weight format.
//
// Each lane of the warp walks the row's 16-byte chunks c = lane, lane + 32, ... and accumulates into
// one f32 partial per activation row, with explicit fused multiply-adds in a fixed order; the 32
// partials are then summed by a butterfly. A warp handles up to R activation rows at once (the weight
// chunk is loaded once for all of them), and the grid tiles the rest, so the value of y[r][o] depends
// only on the weight row and activation row r: never on R, the tile, or the batch size.
//
// Napkin math (H200, 4.2 TB/s copy): a 1536 x 8960 Q8_0 matrix is 14.6 MB, so ~3.5 us at the copy rate;
// one warp per row keeps 8960 warps x 16 B x the unrolled loads in flight.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/kernels.h"

namespace fak::cuda {
namespace {

constexpr int kWarps = 4;  // output rows per block of 128 threads

__device__ __forceinline__ int4 Load16(const void* p) { return __ldg(reinterpret_cast<const int4*>(p)); }
__device__ __forceinline__ float Half(uint16_t h) { return __half2float(__ushort_as_half(h)); }

__device__ __forceinline__ int Dot16(int4 a, int4 b) {
  int s = __dp4a(a.x, b.x, 0);
  s = __dp4a(a.y, b.y, s);
  s = __dp4a(a.z, b.z, s);
  return __dp4a(a.w, b.w, s);
}
__device__ __forceinline__ int Sum16(int4 b) {
  return Dot16(make_int4(0x01010101, 0x01010101, 0x01010101, 0x01010101), b);
}
__device__ __forceinline__ int4 And(int4 a, int m) { return make_int4(a.x & m, a.y & m, a.z & m, a.w & m); }
__device__ __forceinline__ int4 Shr(int4 a, int s) {
  return make_int4(
      static_cast<int>(static_cast<unsigned>(a.x) >> s), static_cast<int>(static_cast<unsigned>(a.y) >> s),
      static_cast<int>(static_cast<unsigned>(a.z) >> s), static_cast<int>(static_cast<unsigned>(a.w) >> s));
}

// Q8_0: chunk c is half of block c / 2 (16 int8); scales in a separate f16 array.
struct Q8_0 {
  static constexpr int kWeightsPerChunk = 16;
  template <int R>
  static __device__ void Dot(const DeviceMatrix& w, const float*, Q8Act x, int64_t o, int64_t c, int64_t r0,
                             int nr, float* acc) {
    const int64_t nb = w.cols / 32, b = c >> 1;
    const int4 wq = Load16(w.q + o * w.cols + c * 16);
    const float dw = Half(w.d[o * nb + b]);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= nr) break;
      const int64_t row = r0 + r;
      const int4 xv = Load16(x.q + row * w.cols + c * 16);
      const float dx = x.d[row * nb + b];
      acc[r] = __fmaf_rn(static_cast<float>(Dot16(wq, xv)), dw * dx, acc[r]);
    }
  }
};

// Q4_K: 144-byte blocks as stored (16-byte header d, dmin, scales[12], then 128 bytes of nibbles).
// Chunk c is 16 bytes of nibbles of block c / 8: 16 weights of sub-block 2j in the low nibbles and
// 16 of sub-block 2j + 1 in the high ones (j = (c / 2) % 4, offset 16 * (c % 2) in both).
struct Q4_K {
  static constexpr int kWeightsPerChunk = 32;
  template <int R>
  static __device__ void Dot(const DeviceMatrix& w, const float*, Q8Act x, int64_t o, int64_t c, int64_t r0,
                             int nr, float* acc) {
    const int64_t nb = w.cols / 256, b = c >> 3;
    const int j = static_cast<int>((c >> 1) & 3), h = static_cast<int>(c & 1);
    const uint8_t* blk = w.q + (o * nb + b) * 144;
    const int4 head = Load16(blk);
    const int4 qs = Load16(blk + 16 + 32 * j + 16 * h);
    const uint8_t* sc = reinterpret_cast<const uint8_t*>(&head) + 4;
    const float d = Half(static_cast<uint16_t>(head.x & 0xFFFF)),
                dmin = Half(static_cast<uint16_t>(head.x >> 16));
    float scale[2], minv[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int s = 2 * j + k;
      int sv, mv;
      if (s < 4) {
        sv = sc[s] & 63;
        mv = sc[s + 4] & 63;
      } else {
        sv = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
        mv = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
      }
      scale[k] = d * static_cast<float>(sv);
      minv[k] = dmin * static_cast<float>(mv);
    }
    const int4 lo = And(qs, 0x0F0F0F0F), hi = And(Shr(qs, 4), 0x0F0F0F0F);
    const int64_t e0 = b * 256 + 64 * j + 16 * h;  // first weight of the low half
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= nr) break;
      const int64_t row = r0 + r;
      const int8_t* xr = x.q + row * w.cols;
      const float* dr = x.d + row * (w.cols / 32);
      const int4 x0 = Load16(xr + e0), x1 = Load16(xr + e0 + 32);
      const float t0 =
          __fmaf_rn(scale[0], static_cast<float>(Dot16(lo, x0)), -minv[0] * static_cast<float>(Sum16(x0)));
      const float t1 =
          __fmaf_rn(scale[1], static_cast<float>(Dot16(hi, x1)), -minv[1] * static_cast<float>(Sum16(x1)));
      acc[r] = __fmaf_rn(dr[e0 / 32], t0, acc[r]);
      acc[r] = __fmaf_rn(dr[e0 / 32 + 1], t1, acc[r]);
    }
  }
};

// Q6_K repacked (weights.h): 208-byte blocks (ql[128], qh[64], scales[16]) and the f16 d apart.
// Chunk c covers 64 weights of block c / 4: half n = (c / 2) % 2, l0 = 16 * (c % 2); the weights
// 128n + 32k + l0 + i (k = 0..3, i < 16), sub-block scale scales[8n + l0 / 16 + 2k].
struct Q6_K {
  static constexpr int kWeightsPerChunk = 64;
  template <int R>
  static __device__ void Dot(const DeviceMatrix& w, const float*, Q8Act x, int64_t o, int64_t c, int64_t r0,
                             int nr, float* acc) {
    const int64_t nb = w.cols / 256, b = c >> 2;
    const int n = static_cast<int>((c >> 1) & 1), l0 = 16 * static_cast<int>(c & 1);
    const uint8_t* blk = w.q + (o * nb + b) * 208;
    const int4 qa = Load16(blk + 64 * n + l0), qb = Load16(blk + 64 * n + 32 + l0);
    const int4 qh = Load16(blk + 128 + 32 * n + l0);
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * n + l0 / 16);
    const float d = Half(w.d[o * nb + b]);
    int4 q[4];
    q[0] = And(qa, 0x0F0F0F0F);
    q[1] = And(qb, 0x0F0F0F0F);
    q[2] = And(Shr(qa, 4), 0x0F0F0F0F);
    q[3] = And(Shr(qb, 4), 0x0F0F0F0F);
    float s[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int4 h2 = And(Shr(qh, 2 * k), 0x03030303);
      q[k] = make_int4(__vsub4(q[k].x | (h2.x << 4), 0x20202020), __vsub4(q[k].y | (h2.y << 4), 0x20202020),
                       __vsub4(q[k].z | (h2.z << 4), 0x20202020), __vsub4(q[k].w | (h2.w << 4), 0x20202020));
      s[k] = d * static_cast<float>(sc[2 * k]);
    }
    const int64_t e0 = b * 256 + 128 * n + l0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= nr) break;
      const int64_t row = r0 + r;
      const int8_t* xr = x.q + row * w.cols;
      const float* dr = x.d + row * (w.cols / 32);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t e = e0 + 32 * k;
        acc[r] = __fmaf_rn(dr[e / 32] * s[k], static_cast<float>(Dot16(q[k], Load16(xr + e))), acc[r]);
      }
    }
  }
};

// F16 / BF16 / F32: chunk c is 16 bytes of the row; activations in f32.
template <MatFormat F>
struct Float {
  static constexpr int kWeightsPerChunk = F == MatFormat::kF32 ? 4 : 8;
  template <int R>
  static __device__ void Dot(const DeviceMatrix& w, const float* x, Q8Act, int64_t o, int64_t c, int64_t r0,
                             int nr, float* acc) {
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

// Warps per output row: long rows are split over the 4 warps of a block (each takes every 4th run of
// 32 chunks) so a matrix with few rows still has enough loads in flight. A function of the row length
// alone, like everything that decides the order of a row's sum.
template <class F>
__host__ __device__ constexpr int WarpsPerRow(int64_t cols) {
  return cols / F::kWeightsPerChunk >= 256 ? kWarps : 1;
}

// Blocks [first[k], first[k + 1]) of the grid compute matrix k of the job; each block computes
// kWarps / WPR output rows.
template <class F, int R, int WPR>
__global__ void __launch_bounds__(kWarps * 32)
    MatVecKernel(MatVecJob job, const float* x, Q8Act xq, int64_t n) {
  constexpr int kRowsPerBlock = kWarps / WPR;
  __shared__ float part[kWarps][R];
  int k = 0;
  int64_t first = 0, blocks = (job.w[0].rows + kRowsPerBlock - 1) / kRowsPerBlock;
  while (k + 1 < job.count && blockIdx.x >= first + blocks) {
    first += blocks;
    ++k;
    blocks = (job.w[k].rows + kRowsPerBlock - 1) / kRowsPerBlock;
  }
  const DeviceMatrix& w = job.w[k];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, piece = warp % WPR;
  const int64_t o = (static_cast<int64_t>(blockIdx.x) - first) * kRowsPerBlock + warp / WPR;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * R;
  const int nr = static_cast<int>(n - r0 < R ? n - r0 : R);
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  if (o < w.rows) {
    const int64_t chunks = w.cols / F::kWeightsPerChunk, step = 32 * WPR;
    int64_t c = piece * 32 + lane;
    // Two chunks per iteration so their loads are in flight together; the sums stay in chunk order.
    for (; c + step < chunks; c += 2 * step) {
      F::template Dot<R>(w, x, xq, o, c, r0, nr, acc);
      F::template Dot<R>(w, x, xq, o, c + step, r0, nr, acc);
    }
    if (c < chunks) F::template Dot<R>(w, x, xq, o, c, r0, nr, acc);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], m);
  }
  if constexpr (WPR > 1) {
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) part[warp][r] = acc[r];
    }
    __syncthreads();
    if (piece != 0) return;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = part[warp][r];
#pragma unroll
      for (int p = 1; p < WPR; ++p) v += part[warp + p][r];
      acc[r] = v;
    }
  }
  if (lane != 0 || o >= w.rows) return;
  const MatVecOut out = job.out[k];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r >= nr) break;
    float v = acc[r];
    if (out.bias != nullptr) v += out.bias[o];
    out.y[(r0 + r) * out.ldy + o] = v;
    if (out.residual != nullptr) out.residual[(r0 + r) * out.ldr + o] += v;
  }
}

template <class F, int R, int WPR>
cudaError_t LaunchR(const MatVecJob& job, const float* x, Q8Act xq, int64_t n, cudaStream_t s) {
  constexpr int kRowsPerBlock = kWarps / WPR;
  int64_t blocks = 0;
  for (int k = 0; k < job.count; ++k) blocks += (job.w[k].rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>((n + R - 1) / R));
  MatVecKernel<F, R, WPR><<<grid, kWarps * 32, 0, s>>>(job, x, xq, n);
  return cudaGetLastError();
}

template <class F, int R>
cudaError_t LaunchW(const MatVecJob& job, const float* x, Q8Act xq, int64_t n, cudaStream_t s) {
  if (WarpsPerRow<F>(job.w[0].cols) == kWarps) return LaunchR<F, R, kWarps>(job, x, xq, n, s);
  return LaunchR<F, R, 1>(job, x, xq, n, s);
}

template <class F>
cudaError_t Launch(const MatVecJob& job, const float* x, Q8Act xq, int64_t n, cudaStream_t s) {
  if (n == 1) return LaunchW<F, 1>(job, x, xq, n, s);
  if (n == 2) return LaunchW<F, 2>(job, x, xq, n, s);
  if (n <= 4) return LaunchW<F, 4>(job, x, xq, n, s);
  return LaunchW<F, 8>(job, x, xq, n, s);
}

}  // namespace

cudaError_t MatVec(const MatVecJob& job, const float* x, Q8Act xq, int64_t n, cudaStream_t stream) {
  if (n <= 0 || job.count <= 0) return cudaSuccess;
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
