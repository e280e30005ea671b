// AVX-512 grouped attention: the AVX2 kernel's arithmetic (attention_avx2.cpp), per head and per lane,
// on 16-lane registers, so its results are bit-identical to the AVX2 kernel's (tested) at about twice
// the work per instruction:
//  - scores: two positions per register, each 256-bit half running the AVX2 kernel's 8-lane
//    dot-product chain over the head's dimensions, then reduced by the same Sum8 and scaled;
//  - values: 16 of a position's dimensions per register, each lane the same chain over positions;
//  - exponentials by the same 8-lane Exp8, summed in position order.
// Compiled with AVX-512F flags (no DQ); internal linkage only (see x86_ymm_body.h for why).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "backends/cpu/attention.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>

#include "backends/cpu/exp_avx2.h"  // Exp8, ExpFast

namespace fak::cpu {
namespace {

inline float Sum8(__m256 v) {  // the AVX2 kernel's reduction, operation for operation
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  return _mm_cvtss_f32(lo);
}

inline __m256 LowHalf(__m512 v) { return _mm512_castps512_ps256(v); }
inline __m256 HighHalf(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

// acc (NV * 16) += sum over j < n of p[j] * values[j], in j order.
template <int NV>
inline void AccumulateValues(const float* p, const float* values, int64_t n, float* acc) {
  __m512 o[NV];
  for (int i = 0; i < NV; ++i) o[i] = _mm512_loadu_ps(acc + i * 16);
  for (int64_t j = 0; j < n; ++j) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    const float* v = values + j * NV * 16;
    for (int i = 0; i < NV; ++i) o[i] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + i * 16), o[i]);
  }
  for (int i = 0; i < NV; ++i) _mm512_storeu_ps(acc + i * 16, o[i]);
}

void AttendGroupAvx512Impl(const float* q, int64_t group, int64_t head_dim, const HeadKv& kv, int64_t n_ctx,
                           float scale, float* scratch, float* out) {
  if (kv.f32 || head_dim % 16 != 0 || head_dim > 512 || group > 64) {
    AttendGroupAvx2()(q, group, head_dim, kv, n_ctx, scale, scratch, out);
    return;
  }
  const int64_t chunks = head_dim / 8;             // 8-dimension chunks: one AVX2 register each
  float* scores = scratch;                         // (group, n_ctx)
  float* tile = scratch + group * n_ctx;           // kAttendTile positions of keys, then of values
  float* acc_out = tile + kAttendTile * head_dim;  // (group, head_dim) partial sums between tiles
  // Keys of a tile in pairs of positions: for pair p and chunk c, 16 floats = position 2p's 8
  // dimensions then position 2p+1's (zeros past the tile's end).
  auto convert_keys = [&](int64_t j0, int64_t n) {
    for (int64_t j = 0; j < n + (n & 1); ++j) {
      float* dst = tile + (j / 2) * chunks * 16 + (j & 1) * 8;
      if (j == n) {
        for (int64_t c = 0; c < chunks; ++c) _mm256_storeu_ps(dst + c * 16, _mm256_setzero_ps());
        continue;
      }
      const uint16_t* src = kv.k_pages[(j0 + j) / kv.page_tokens] + ((j0 + j) % kv.page_tokens) * head_dim;
      for (int64_t c = 0; c < chunks; ++c) {
        _mm256_storeu_ps(dst + c * 16,
                         _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c * 8))));
      }
    }
  };
  auto convert_values = [&](int64_t j0, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      const uint16_t* src = kv.v_pages[(j0 + j) / kv.page_tokens] + ((j0 + j) % kv.page_tokens) * head_dim;
      for (int64_t i = 0; i < head_dim; i += 16) {
        _mm512_storeu_ps(tile + j * head_dim + i,
                         _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
      }
    }
  };
  float mx[64];
  for (int64_t g = 0; g < group; ++g) mx[g] = -INFINITY;
  alignas(64) float qdup[2 * 512];  // a head's query, each 8-dimension chunk twice
  for (int64_t j0 = 0; j0 < n_ctx; j0 += kAttendTile) {
    const int64_t n = n_ctx - j0 < kAttendTile ? n_ctx - j0 : kAttendTile;
    convert_keys(j0, n);
    const int64_t pairs = (n + 1) / 2;
    for (int64_t g = 0; g < group; ++g) {
      const float* qg = q + g * head_dim;
      for (int64_t c = 0; c < chunks; ++c) {
        const __m256 qc = _mm256_loadu_ps(qg + c * 8);
        _mm256_store_ps(qdup + c * 16, qc);
        _mm256_store_ps(qdup + c * 16 + 8, qc);
      }
      float* sg = scores + g * n_ctx + j0;
      auto store = [&](int64_t p, __m512 a) {
        sg[2 * p] = Sum8(LowHalf(a)) * scale;
        if (2 * p + 1 < n) sg[2 * p + 1] = Sum8(HighHalf(a)) * scale;
      };
      int64_t p = 0;
      // Four pairs side by side: eight positions, four independent chains.
      for (; p + 4 <= pairs; p += 4) {
        const float* k0 = tile + p * chunks * 16;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t c = 0; c < chunks; ++c) {
          const __m512 qd = _mm512_load_ps(qdup + c * 16);
          a0 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k0 + c * 16), a0);
          a1 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k0 + (chunks + c) * 16), a1);
          a2 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k0 + (2 * chunks + c) * 16), a2);
          a3 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k0 + (3 * chunks + c) * 16), a3);
        }
        store(p, a0);
        store(p + 1, a1);
        store(p + 2, a2);
        store(p + 3, a3);
      }
      for (; p < pairs; ++p) {
        const float* k0 = tile + p * chunks * 16;
        __m512 a = _mm512_setzero_ps();
        for (int64_t c = 0; c < chunks; ++c)
          a = _mm512_fmadd_ps(_mm512_load_ps(qdup + c * 16), _mm512_loadu_ps(k0 + c * 16), a);
        store(p, a);
      }
      for (int64_t j = 0; j < n; ++j) {
        if (sg[j] > mx[g]) mx[g] = sg[j];
      }
    }
  }
  float sums[64];
  for (int64_t g = 0; g < group; ++g) sums[g] = ExpMinusMaxSum(scores + g * n_ctx, n_ctx, mx[g]);
  for (int64_t i = 0; i < group * head_dim; ++i) acc_out[i] = 0.0f;
  const int64_t nv = head_dim / 16;
  for (int64_t j0 = 0; j0 < n_ctx; j0 += kAttendTile) {
    const int64_t n = n_ctx - j0 < kAttendTile ? n_ctx - j0 : kAttendTile;
    convert_values(j0, n);
    for (int64_t g = 0; g < group; ++g) {
      const float* sg = scores + g * n_ctx + j0;
      float* ag = acc_out + g * head_dim;
      if (nv == 4) {
        AccumulateValues<4>(sg, tile, n, ag);
      } else if (nv == 8) {
        AccumulateValues<8>(sg, tile, n, ag);
      } else {
        for (int64_t i = 0; i < nv; ++i) {
          __m512 o = _mm512_loadu_ps(ag + i * 16);
          for (int64_t j = 0; j < n; ++j) {
            o = _mm512_fmadd_ps(_mm512_set1_ps(sg[j]), _mm512_loadu_ps(tile + j * head_dim + i * 16), o);
          }
          _mm512_storeu_ps(ag + i * 16, o);
        }
      }
    }
  }
  for (int64_t g = 0; g < group; ++g) {
    const __m512 inv = _mm512_set1_ps(1.0f / sums[g]);
    for (int64_t i = 0; i < nv; ++i) {
      _mm512_storeu_ps(out + g * head_dim + i * 16,
                       _mm512_mul_ps(_mm512_loadu_ps(acc_out + g * head_dim + i * 16), inv));
    }
  }
}

}  // namespace

AttendGroupFn AttendGroupAvx512() { return &AttendGroupAvx512Impl; }

}  // namespace fak::cpu
#else
namespace fak::cpu {
AttendGroupFn AttendGroupAvx512() { return nullptr; }
}  // namespace fak::cpu
#endif
