// The sum of a quantized weight row against int8 activations, defined once for the matrix-vector
// kernels (matvec.cu, matvec_rows.cu: decode) and the tensor-core GEMM (gemm.cu, prefill and large
// batches), so they produce the same bits and a row's result never depends on which kernel the batch
// size picked.
//
// A row of `cols` weights is nb = cols / 32 blocks of 32, in segments of 8 consecutive blocks (256
// weights, one K-quant super-block). Each segment gives one f32 term:
//   - Q8_0 (activations with a scale per 32 values or per 256, kernels.h's Q8Act): block b's term from
//     its exact integer dot (Q8_0Term), the segment's 8 terms as the tree
//     ((t0 + t1) + (t2 + t3)) + ((t4 + t5) + (t6 + t7)), blocks past the row's end counting as +0;
//   - Q4_K and Q6_K (activations with one scale dx per 256 values): the super-block's integer dots
//     weighted by its integer sub-block scales (and Q4_K's mins by the activations' block sums) add up
//     exactly in int32, whatever the order, and give the term in a few rounded steps (Q4_KSegTerm,
//     Q6_KSegTerm). Per 32 weights that is one integer multiply-add instead of five floating-point
//     instructions, which is what bounded the GEMM (docs/bench/gpu.md).
// The segments' terms are summed:
//   1. segments left to right within each of P pieces (P = 4 for rows of 4096 weights or more, else 1;
//      piece p holds segments [ng * p / P, ng * (p + 1) / P) of the ng), starting from +0;
//   2. pieces left to right.
// Every step is an explicitly rounded operation (no contraction into fused multiply-adds), so the order
// is a function of `cols` alone.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/kernels.h"  // MatVecOut

namespace fak::cuda {

// v as a float, exactly, for |v| < 2^22: v added to the mantissa of 1.5 * 2^23, that number taken
// away. Two full-rate instructions instead of a quarter-rate conversion; the sums below stay in range
// (Q8_0: 32 * 128 * 127; Q4_K: 32 * 15 * 127; Q6_K: 16 * 32 * 127).
//
// The term functions take their integer dots biased, that is plus kExactBias: a tensor-core or dp4a sum
// that starts from kExactBias instead of 0 has done the first of the two instructions for free.
constexpr int kExactBias = 0x4B400000;
__device__ __forceinline__ float BiasedFloat(int biased) {
  return __fsub_rn(__int_as_float(biased), 12582912.0f);
}
__device__ __forceinline__ float ExactFloat(int v) { return BiasedFloat(v + kExactBias); }

// Q8_0: isum = the block's integer dot plus kExactBias; dw its f16 scale, dx the activations' block scale.
__device__ __forceinline__ float Q8_0Term(int isum, float dw, float dx) {
  return __fmul_rn(BiasedFloat(isum), __fmul_rn(dw, dx));
}

// Q4_K super-block: s1 = sum over its 8 sub-blocks of scale * (dot of the 4-bit quants with the
// activations), s2 = sum of min * (the activations' sum over the sub-block), both exact int32 (|s1| <
// 8 * 63 * 32 * 15 * 127 < 2^25, |s2| < 2^21); d and dmin its f16 scales, dx the activations' scale.
// s2 may come biased (plus kExactBias: a tensor-core sum started from it), s1 is converted rounded to
// nearest.
__device__ __forceinline__ float Q4_KSegTerm(int s1, int s2_biased, float d, float dmin, float dx) {
  return __fmul_rn(dx, __fmaf_rn(d, __int2float_rn(s1), -__fmul_rn(dmin, BiasedFloat(s2_biased))));
}

// Q6_K super-block: s = sum over its 16 halves of scale (int8) * (dot of the 6-bit values minus 32 with
// the activations), exact int32 (|s| < 16 * 128 * 16 * 32 * 127 < 2^28), converted rounded to nearest.
__device__ __forceinline__ float Q6_KSegTerm(int s, float d, float dx) {
  return __fmul_rn(__int2float_rn(s), __fmul_rn(d, dx));
}

// Scale and min of sub-block s (0..7) from the 12 packed bytes of a Q4_K super-block.
__device__ __forceinline__ void Q4_KScaleMin(const uint8_t* sc, int s, int* scale, int* min) {
  if (s < 4) {
    *scale = sc[s] & 63;
    *min = sc[s + 4] & 63;
  } else {
    *scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
    *min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
  }
}

// Q4_KScaleMin from the 12 bytes of scales and mins as three little-endian words, for a
// sub-block s that is not a compile-time constant (a byte array indexed by it would live in local memory).
__device__ __forceinline__ void Q4_KScaleMinWords(unsigned w0, unsigned w1, unsigned w2, int s, int* scale,
                                                  int* min) {
  const int i = 8 * (s & 3);
  if (s < 4) {
    *scale = static_cast<int>((w0 >> i) & 63);
    *min = static_cast<int>((w1 >> i) & 63);
  } else {
    *scale = static_cast<int>(((w2 >> i) & 0xF) | (((w0 >> (i + 6)) & 3) << 4));
    *min = static_cast<int>(((w2 >> (i + 4)) & 0xF) | (((w1 >> (i + 6)) & 3) << 4));
  }
}

__device__ __forceinline__ float Tree8(const float* t) {
  return __fadd_rn(__fadd_rn(__fadd_rn(t[0], t[1]), __fadd_rn(t[2], t[3])),
                   __fadd_rn(__fadd_rn(t[4], t[5]), __fadd_rn(t[6], t[7])));
}

__device__ __forceinline__ float HalfBits(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ int4 Load16(const void* p) { return __ldg(reinterpret_cast<const int4*>(p)); }
// The dot of 16 signed bytes, chained from c (kExactBias for a term's biased sum).
__device__ __forceinline__ int Dot16(int4 a, int4 b, int c = 0) {
  c = __dp4a(a.x, b.x, c);
  c = __dp4a(a.y, b.y, c);
  c = __dp4a(a.z, b.z, c);
  return __dp4a(a.w, b.w, c);
}
// The same with unsigned bytes in a (Q4_K's high nibbles masked in place: 16 times their value).
__device__ __forceinline__ int DotU4(int a, int b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ int DotU16(int4 a, int4 b, int c) {
  c = DotU4(a.x, b.x, c);
  c = DotU4(a.y, b.y, c);
  c = DotU4(a.z, b.z, c);
  return DotU4(a.w, b.w, c);
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
// The 6-bit Q6_K quants of 16 weights from their low 4 bits (lo, one per byte) and 2 high bits (hi),
// minus 32: int8 values in -32..31.
__device__ __forceinline__ int4 Q6Values(int4 lo, int4 hi) {
  return make_int4(__vsub4(lo.x | (hi.x << 4), 0x20202020), __vsub4(lo.y | (hi.y << 4), 0x20202020),
                   __vsub4(lo.z | (hi.z << 4), 0x20202020), __vsub4(lo.w | (hi.w << 4), 0x20202020));
}

// The running tree of one output over a segment's 8 blocks (step 1): ((t0+t1)+(t2+t3))+((t4+t5)+(t6+t7)).
struct Tree {
  float prev, pair, quad;
  template <int b>
  __device__ __forceinline__ void Add(float t, float* seg) {
    if constexpr (b % 2 == 0) {
      prev = t;
    } else {
      const float p = __fadd_rn(prev, t);
      if constexpr (b % 4 == 1) {
        pair = p;
      } else if constexpr (b == 3) {
        quad = __fadd_rn(pair, p);
      } else {
        *seg = __fadd_rn(quad, __fadd_rn(pair, p));
      }
    }
  }
};

// c = kExactBias + a (16 x 32 int8, row-major) . b (32 x 8 int8): one tensor-core instruction, exact
// int32 sums started from the bias the term functions expect (read from one register for all four). Lane
// (g, q) = (lane / 4, lane % 4) holds a[0] = A[g][4q..], a[1] = A[g + 8][4q..], a[2] = A[g][16 + 4q..],
// a[3] = A[g + 8][16 + 4q..], b0 = B[4q..][g], b1 = B[16 + 4q..][g], and gets c[e] = C[g + 8 (e / 2)][2q
// + e % 2].
__device__ __forceinline__ void Mma32Biased(int* c, const int* a, int b0, int b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(kExactBias));
}

// y[r][o] = v (+ bias[o]); then residual[r][o] += that value.
__device__ __forceinline__ void StoreResult(const MatVecOut& out, int64_t r, int64_t o, float v) {
  if (out.bias != nullptr) v += out.bias[o];
  out.y[r * out.ldy + o] = v;
  if (out.residual != nullptr) out.residual[r * out.ldr + o] += v;
}

}  // namespace fak::cuda
