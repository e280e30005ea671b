// AVX2 + F16C attention: keys and values are converted 8 lanes at a time. Compiled with its own
// target flags; selected at run time only on CPUs that have them.
#include "backends/cpu/attention.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>

#include "backends/cpu/exp_avx2.h"  // Exp8, ExpFast

namespace fak::cpu {
namespace {

inline float Sum8(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  return _mm_cvtss_f32(lo);
}

void AttendAvx2(const float* q, int64_t head_dim, const HeadKv& kv, int64_t n_ctx, float scale, float* scores,
                float* out) {
  if (kv.f32 || head_dim % 8 != 0 || head_dim > 512) {
    AttendHeadPortable(q, head_dim, kv, n_ctx, scale, scores, out);
    return;
  }
  float max_score = -INFINITY;
  for (int64_t j = 0; j < n_ctx; ++j) {
    const uint16_t* k = kv.k_pages[j / kv.page_tokens] + (j % kv.page_tokens) * head_dim;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t d = 0; d < head_dim; d += 8) {
      __m256 kf = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + d)));
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), kf, acc);
    }
    const float s = Sum8(acc) * scale;
    scores[j] = s;
    if (s > max_score) max_score = s;
  }
  const float sum = ExpMinusMaxSum(scores, n_ctx, max_score);
  __m256 o[64];
  const int64_t nv = head_dim / 8;
  for (int64_t i = 0; i < nv; ++i) o[i] = _mm256_setzero_ps();
  for (int64_t j = 0; j < n_ctx; ++j) {
    const uint16_t* v = kv.v_pages[j / kv.page_tokens] + (j % kv.page_tokens) * head_dim;
    const __m256 p = _mm256_set1_ps(scores[j]);
    for (int64_t i = 0; i < nv; ++i) {
      __m256 vf = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i * 8)));
      o[i] = _mm256_fmadd_ps(p, vf, o[i]);
    }
  }
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  for (int64_t i = 0; i < nv; ++i) _mm256_storeu_ps(out + i * 8, _mm256_mul_ps(o[i], inv));
}

// acc (NV * 8) += sum over j < n of p[j] * values[j], in j order; NV known at compile time so the
// accumulators stay in registers (head_dim 64 and 128).
template <int NV>
inline void AccumulateValues(const float* p, const float* values, int64_t n, float* acc) {
  __m256 o[NV];
  for (int i = 0; i < NV; ++i) o[i] = _mm256_loadu_ps(acc + i * 8);
  for (int64_t j = 0; j < n; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const float* v = values + j * NV * 8;
    for (int i = 0; i < NV; ++i) o[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + i * 8), o[i]);
  }
  for (int i = 0; i < NV; ++i) _mm256_storeu_ps(acc + i * 8, o[i]);
}

// The one-head kernel above, for `group` heads over one KV head: keys and values are converted to
// f32 a tile at a time and reused by every head. Per head, every float operation is the one the
// one-head kernel does, in the same order (accumulators are only parked in scratch between tiles).
void AttendGroupAvx2Impl(const float* q, int64_t group, int64_t head_dim, const HeadKv& kv, int64_t n_ctx,
                         float scale, float* scratch, float* out) {
  if (kv.f32 || head_dim % 8 != 0 || head_dim > 512) {
    AttendGroupPortable(q, group, head_dim, kv, n_ctx, scale, scratch, out);
    return;
  }
  const int64_t nv = head_dim / 8;
  float* scores = scratch;                         // (group, n_ctx)
  float* tile = scratch + group * n_ctx;           // (kAttendTile, head_dim) f32 keys, then values
  float* acc_out = tile + kAttendTile * head_dim;  // (group, head_dim) partial sums between tiles
  auto convert = [&](const uint16_t* const* pages, int64_t j0, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      const uint16_t* src = pages[(j0 + j) / kv.page_tokens] + ((j0 + j) % kv.page_tokens) * head_dim;
      for (int64_t i = 0; i < nv; ++i) {
        _mm256_storeu_ps(tile + j * head_dim + i * 8,
                         _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * 8))));
      }
    }
  };
  float max_score[64];
  float* mx = group <= 64 ? max_score : acc_out;  // group > 64 does not occur (n_head / n_kv_head)
  for (int64_t g = 0; g < group; ++g) mx[g] = -INFINITY;
  for (int64_t j0 = 0; j0 < n_ctx; j0 += kAttendTile) {
    const int64_t n = n_ctx - j0 < kAttendTile ? n_ctx - j0 : kAttendTile;
    convert(kv.k_pages, j0, n);
    for (int64_t g = 0; g < group; ++g) {
      const float* qg = q + g * head_dim;
      float* sg = scores + g * n_ctx + j0;
      int64_t j = 0;
      // Four positions side by side: four independent chains instead of one latency-bound one.
      for (; j + 4 <= n; j += 4) {
        const float* k0 = tile + j * head_dim;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t d = 0; d < head_dim; d += 8) {
          const __m256 qd = _mm256_loadu_ps(qg + d);
          a0 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + d), a0);
          a1 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + head_dim + d), a1);
          a2 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + 2 * head_dim + d), a2);
          a3 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + 3 * head_dim + d), a3);
        }
        sg[j] = Sum8(a0) * scale;
        sg[j + 1] = Sum8(a1) * scale;
        sg[j + 2] = Sum8(a2) * scale;
        sg[j + 3] = Sum8(a3) * scale;
      }
      for (; j < n; ++j) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t d = 0; d < head_dim; d += 8) {
          acc = _mm256_fmadd_ps(_mm256_loadu_ps(qg + d), _mm256_loadu_ps(tile + j * head_dim + d), acc);
        }
        sg[j] = Sum8(acc) * scale;
      }
      for (j = 0; j < n; ++j) {
        if (sg[j] > mx[g]) mx[g] = sg[j];
      }
    }
  }
  float sums[64];
  for (int64_t g = 0; g < group; ++g) sums[g] = ExpMinusMaxSum(scores + g * n_ctx, n_ctx, mx[g]);
  for (int64_t i = 0; i < group * head_dim; ++i) acc_out[i] = 0.0f;
  __m256 o[64];
  for (int64_t j0 = 0; j0 < n_ctx; j0 += kAttendTile) {
    const int64_t n = n_ctx - j0 < kAttendTile ? n_ctx - j0 : kAttendTile;
    convert(kv.v_pages, j0, n);
    for (int64_t g = 0; g < group; ++g) {
      const float* sg = scores + g * n_ctx + j0;
      float* ag = acc_out + g * head_dim;
      if (nv == 8) {
        AccumulateValues<8>(sg, tile, n, ag);
      } else if (nv == 16) {
        AccumulateValues<16>(sg, tile, n, ag);
      } else {
        for (int64_t i = 0; i < nv; ++i) o[i] = _mm256_loadu_ps(ag + i * 8);
        for (int64_t j = 0; j < n; ++j) {
          const __m256 p = _mm256_set1_ps(sg[j]);
          for (int64_t i = 0; i < nv; ++i)
            o[i] = _mm256_fmadd_ps(p, _mm256_loadu_ps(tile + j * head_dim + i * 8), o[i]);
        }
        for (int64_t i = 0; i < nv; ++i) _mm256_storeu_ps(ag + i * 8, o[i]);
      }
    }
  }
  for (int64_t g = 0; g < group; ++g) {
    const __m256 inv = _mm256_set1_ps(1.0f / sums[g]);
    for (int64_t i = 0; i < nv; ++i) {
      _mm256_storeu_ps(out + g * head_dim + i * 8,
                       _mm256_mul_ps(_mm256_loadu_ps(acc_out + g * head_dim + i * 8), inv));
    }
  }
}

}  // namespace

AttendHeadFn AttendHeadAvx2() { return &AttendAvx2; }
AttendGroupFn AttendGroupAvx2() { return &AttendGroupAvx2Impl; }

}  // namespace fak::cpu
#else
namespace fak::cpu {
AttendHeadFn AttendHeadAvx2() { return nullptr; }
AttendGroupFn AttendGroupAvx2() { return nullptr; }
}  // namespace fak::cpu
#endif
