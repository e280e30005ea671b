// 256-bit kernel bodies shared by the AVX2 and AVX-512 tables: the whole of both levels' matvec and
// matmul entries, filled by FillYmm. Included only by ISA translation units, after the level's
// x86_dot_*.h, which defines (in an anonymous namespace)
//   __m256i DotU8S8(__m256i acc, __m256i u, __m256i s)
// adding, to each of the 8 int32 lanes of acc, the dot of 4 consecutive unsigned bytes of u with the
// signed bytes of s (callers keep every byte pair sum within int16: |u| <= 128, |s| <= 127).
//
// Everything here has internal linkage and uses no standard-library templates: a weak inline symbol
// compiled with AVX-512 flags must never be the one the linker keeps for scalar code.
//
// Orders of float operations follow quant/: per block (Q8_0) or super-block (k-quants) an exact
// integer sum, then scale products and accumulation in the reference's sequence.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/isa_tables.h"  // SetEntry
#include "quant/ggml_type.h"          // GgmlType
#include "quant/q4_k.h"               // BlockQ4_K
#include "quant/q6_k.h"               // BlockQ6_K
#include "quant/q8_0.h"               // BlockQ8_0
#include "quant/q8_k.h"               // BlockQ8_K

namespace fak::cpu {
namespace {

inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

inline int32_t HsumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// Sums of 4 vectors' lanes, lane r = sum of v[r].
inline __m128i Hsum4I32(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// ---------------------------------------------------------------------------------------------------
// Q8_0 x Q8_0: 4 weight rows x T tokens. Weight quants are loaded once per block and reused for every
// token; lane r of acc[t] is the dot of row r with token t.
template <int T>
inline void TileQ8_0(const BlockQ8_0* const w[4], const BlockQ8_0* const a[T], int64_t nb, __m128 acc[T]) {
  for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wq[4], wabs[4];
    for (int r = 0; r < 4; ++r) {
      wq[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][b].qs));
      wabs[r] = _mm256_abs_epi8(wq[r]);
    }
    const __m128 dw = _mm_cvtph_ps(
        _mm_setr_epi16(static_cast<short>(w[0][b].d), static_cast<short>(w[1][b].d),
                       static_cast<short>(w[2][b].d), static_cast<short>(w[3][b].d), 0, 0, 0, 0));
    for (int t = 0; t < T; ++t) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs));
      const __m256i z = _mm256_setzero_si256();
      const __m256i p0 = DotU8S8(z, wabs[0], _mm256_sign_epi8(av, wq[0]));
      const __m256i p1 = DotU8S8(z, wabs[1], _mm256_sign_epi8(av, wq[1]));
      const __m256i p2 = DotU8S8(z, wabs[2], _mm256_sign_epi8(av, wq[2]));
      const __m256i p3 = DotU8S8(z, wabs[3], _mm256_sign_epi8(av, wq[3]));
      const __m128 isum = _mm_cvtepi32_ps(Hsum4I32(p0, p1, p2, p3));
      const __m128 s = _mm_mul_ps(dw, _mm_set1_ps(HalfToFloat(a[t][b].d)));
      acc[t] = _mm_add_ps(acc[t], _mm_mul_ps(s, isum));
    }
  }
}

// Runs a 4-row tile function over rows [r0, r1) and tokens [0, n_tokens). Rows past r1 in the last
// tile repeat the last row; their lanes are not stored.
template <typename Block, template <int> class Tile>
void RunRowTiles(const uint8_t* w, size_t row_bytes, int64_t nb, const uint8_t* act, size_t act_stride,
                 int64_t n_tokens, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; r += 4) {
    const Block* rows[4];
    for (int i = 0; i < 4; ++i) {
      const int64_t ri = r + i < r1 ? r + i : r1 - 1;
      rows[i] = reinterpret_cast<const Block*>(w + ri * row_bytes);
    }
    const int valid = static_cast<int>(r1 - r < 4 ? r1 - r : 4);
    int64_t t = 0;
    auto store = [&](const __m128* acc, int count) {
      for (int k = 0; k < count; ++k) {
        alignas(16) float out[4];
        _mm_store_ps(out, acc[k]);
        for (int i = 0; i < valid; ++i) y[(t + k) * ldy + r + i] = out[i];
      }
    };
    for (; t + 4 <= n_tokens; t += 4) {
      const auto* a0 = act + t * act_stride;
      const typename Tile<4>::ActBlock* acts[4];
      for (int k = 0; k < 4; ++k)
        acts[k] = reinterpret_cast<const typename Tile<4>::ActBlock*>(a0 + k * act_stride);
      __m128 acc[4];
      Tile<4>::Run(rows, acts, nb, acc);
      store(acc, 4);
    }
    for (; t < n_tokens; ++t) {
      const typename Tile<1>::ActBlock* acts[1] = {
          reinterpret_cast<const typename Tile<1>::ActBlock*>(act + t * act_stride)};
      __m128 acc[1];
      Tile<1>::Run(rows, acts, nb, acc);
      store(acc, 1);
    }
  }
}

template <int T>
struct Q8_0Tile {
  using ActBlock = BlockQ8_0;
  static void Run(const BlockQ8_0* const w[4], const BlockQ8_0* const a[T], int64_t nb, __m128 acc[T]) {
    TileQ8_0<T>(w, a, nb, acc);
  }
};

inline void MatMulQ8_0Ymm(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act,
                          size_t act_stride, int64_t n_tokens, float* y, int64_t ldy, int64_t r0,
                          int64_t r1) {
  RunRowTiles<BlockQ8_0, Q8_0Tile>(w, row_bytes, n / kQK8_0, act, act_stride, n_tokens, y, ldy, r0, r1);
}

// ---------------------------------------------------------------------------------------------------
// k-quants: a super-block of one weight row is unpacked once into 8-bit quants and int16 scale vectors
// and then dotted with each token's Q8_K block.

struct UnpackedQ4_K {
  __m256i q[8];      // sub-block j: 32 quants in [0, 15]
  __m256i scale[8];  // sub-block j: sc_j in every int16 lane
  int32_t min[8];    // m_j
  float d, dmin;
};

inline void Unpack(const BlockQ4_K& b, UnpackedQ4_K* u) {
  uint32_t w[3];
  std::memcpy(w, b.scales, 12);
  const uint32_t sc_lo = w[0] & 0x3F3F3F3Fu, m_lo = w[1] & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (w[2] & 0x0F0F0F0Fu) | (((w[0] >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((w[2] >> 4) & 0x0F0F0F0Fu) | (((w[1] >> 6) & 0x03030303u) << 4);
  const uint64_t sc = sc_lo | static_cast<uint64_t>(sc_hi) << 32;
  const uint64_t m = m_lo | static_cast<uint64_t>(m_hi) << 32;
  const __m256i mask = _mm256_set1_epi8(0x0F);
  for (int c = 0; c < 4; ++c) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
    u->q[2 * c] = _mm256_and_si256(raw, mask);
    u->q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
  }
  for (int j = 0; j < 8; ++j) {
    u->scale[j] = _mm256_set1_epi16(static_cast<short>((sc >> (8 * j)) & 0xFF));
    u->min[j] = static_cast<int32_t>((m >> (8 * j)) & 0xFF);
  }
  u->d = HalfToFloat(b.d);
  u->dmin = HalfToFloat(b.dmin);
}

// Lanes summing to sum_k scale[k] * (q[k] . 32 activation quants at qs + 32k), exact in int32.
inline __m256i ScaledDots(const __m256i q[8], const __m256i scale[8], const int8_t* qs) {
  __m256i acc = _mm256_setzero_si256();
  for (int k = 0; k < 8; ++k) {
    const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * k));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], av), scale[k]));
  }
  return acc;
}

// One super-block's term of a row's dot with one token, as the reference adds it to the row's sum.
inline float BlockTerm(const UnpackedQ4_K& u, const BlockQ8_K& a) {
  const int32_t sum = HsumI32(ScaledDots(u.q, u.scale, a.qs));
  int32_t min_sum = 0;
  for (int j = 0; j < 8; ++j) min_sum += u.min[j] * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
  const float dd = a.d * u.d, dm = a.d * u.dmin;
  return dd * static_cast<float>(sum) - dm * static_cast<float>(min_sum);
}

struct UnpackedQ6_K {
  __m256i q[8];      // 32 quants in [0, 63]: elements 32k..32k+31 of the super-block
  __m256i scale[8];  // int16 lanes 0-7: sc_{2k}, lanes 8-15: sc_{2k+1}
  __m256i scale16;   // the 16 scales as int16, for the -32 offset term
  float d;
};

inline void Unpack(const BlockQ6_K& b, UnpackedQ6_K* u) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  for (int h = 0; h < 2; ++h) {
    const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
    const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
    const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4);
    const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4);
    const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4);
    const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4);
    u->q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), h0);
    u->q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), h1);
    u->q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), h2);
    u->q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), h3);
  }
  for (int k = 0; k < 8; ++k) {
    u->scale[k] = _mm256_setr_m128i(_mm_set1_epi16(b.scales[2 * k]), _mm_set1_epi16(b.scales[2 * k + 1]));
  }
  u->scale16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  u->d = HalfToFloat(b.d);
}

inline float BlockTerm(const UnpackedQ6_K& u, const BlockQ8_K& a) {
  const float dd = a.d * u.d;
  const __m256i acc = ScaledDots(u.q, u.scale, a.qs);
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  const __m256i off = _mm256_madd_epi16(bs, u.scale16);  // lanes summing to sum_j sc_j * bsum_j
  return dd * static_cast<float>(HsumI32(acc) - 32 * HsumI32(off));
}

// Rows [r0, r1) of nb super-blocks x all tokens; each super-block of a row is unpacked once and used for
// every token.
template <typename Block, typename Unpacked>
inline void MatMulKQuantBlocks(const uint8_t* w, size_t row_bytes, int64_t nb, const uint8_t* act,
                               size_t act_stride, int64_t n_tokens, float* y, int64_t ldy, int64_t r0,
                               int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w + r * row_bytes);
    for (int64_t t = 0; t < n_tokens; ++t) y[t * ldy + r] = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      Unpacked u;
      Unpack(row[b], &u);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride)[b];
        float& out = y[t * ldy + r];
        out = out + BlockTerm(u, a);
      }
    }
  }
}

// The table entry. The body takes the block count from here rather than dividing n itself: GCC then
// keeps it out of line and allocates its hot loops as it did for the two hand-written copies.
template <typename Block, typename Unpacked>
void MatMulKQuantYmm(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, size_t act_stride,
                     int64_t n_tokens, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  MatMulKQuantBlocks<Block, Unpacked>(w, row_bytes, n / kQK_K, act, act_stride, n_tokens, y, ldy, r0, r1);
}

// ---------------------------------------------------------------------------------------------------
// f16 / bf16 / f32 x f32: 16 float lanes (two ymm), lane = element index mod 16, multiply then add,
// then the ReduceLanes16 tree. Up to 4 tokens share each converted weight vector. kType is the weight
// type: f16, bf16 or f32.

inline __m256 LoadF16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 LoadBf16x8(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

template <GgmlType kType>
inline __m256 LoadWeights8(const uint8_t* w, int64_t i) {
  if (kType == GgmlType::kF32) return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + i);
  const uint16_t* h = reinterpret_cast<const uint16_t*>(w) + i;
  return kType == GgmlType::kBF16 ? LoadBf16x8(h) : LoadF16x8(h);
}

template <GgmlType kType>
inline float WeightAt(const uint8_t* w, int64_t k) {
  if (kType == GgmlType::kF32) return reinterpret_cast<const float*>(w)[k];
  const uint16_t h = reinterpret_cast<const uint16_t*>(w)[k];
  if (kType == GgmlType::kF16) return HalfToFloat(h);
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float ReduceLanes16Scalar(const float* l) {
  float a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) a[i] = l[i] + l[i + 8];
  for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
  for (int i = 0; i < 2; ++i) c[i] = b[i] + b[i + 2];
  return c[0] + c[1];
}

template <GgmlType kType, int T>
inline void DotHalfTile(const uint8_t* w, const float* const x[T], int64_t n, float out[T]) {
  __m256 lo[T], hi[T];
  for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = LoadWeights8<kType>(w, i);
    const __m256 w1 = LoadWeights8<kType>(w, i + 8);
    for (int t = 0; t < T; ++t) {
      lo[t] = _mm256_add_ps(lo[t], _mm256_mul_ps(w0, _mm256_loadu_ps(x[t] + i)));
      hi[t] = _mm256_add_ps(hi[t], _mm256_mul_ps(w1, _mm256_loadu_ps(x[t] + i + 8)));
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(32) float lane[16];
    _mm256_store_ps(lane, lo[t]);
    _mm256_store_ps(lane + 8, hi[t]);
    for (int64_t k = i; k < n; ++k) {
      const float p = WeightAt<kType>(w, k) * x[t][k];
      lane[k & 15] = lane[k & 15] + p;
    }
    out[t] = ReduceLanes16Scalar(lane);
  }
}

template <GgmlType kType>
void MatMulHalfYmm(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, size_t act_stride,
                   int64_t n_tokens, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * row_bytes;
    int64_t t = 0;
    for (; t + 4 <= n_tokens; t += 4) {
      const float* x[4];
      for (int k = 0; k < 4; ++k) x[k] = reinterpret_cast<const float*>(act + (t + k) * act_stride);
      float out[4];
      DotHalfTile<kType, 4>(row, x, n, out);
      for (int k = 0; k < 4; ++k) y[(t + k) * ldy + r] = out[k];
    }
    for (; t < n_tokens; ++t) {
      const float* x[1] = {reinterpret_cast<const float*>(act + t * act_stride)};
      float out[1];
      DotHalfTile<kType, 1>(row, x, n, out);
      y[t * ldy + r] = out[0];
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// The entries of a 256-bit table: its matvec ones (kMatVec) or its matmul ones.
template <bool kMatVec>
inline void FillYmm(KernelTable* t) {
  SetEntry<kMatVec, GgmlType::kF16, MatMulHalfYmm<GgmlType::kF16>>(t);
  SetEntry<kMatVec, GgmlType::kBF16, MatMulHalfYmm<GgmlType::kBF16>>(t);
  SetEntry<kMatVec, GgmlType::kF32, MatMulHalfYmm<GgmlType::kF32>>(t);
  SetEntry<kMatVec, GgmlType::kQ8_0, MatMulQ8_0Ymm>(t);
  SetEntry<kMatVec, GgmlType::kQ4_K, MatMulKQuantYmm<BlockQ4_K, UnpackedQ4_K>>(t);
  SetEntry<kMatVec, GgmlType::kQ6_K, MatMulKQuantYmm<BlockQ6_K, UnpackedQ6_K>>(t);
}

}  // namespace
}  // namespace fak::cpu
