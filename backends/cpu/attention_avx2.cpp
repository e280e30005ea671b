// AVX2 + F16C attention: keys and values are converted 8 lanes at a time. Compiled with its own
// target flags; selected at run time only on CPUs that have them.
#include "backends/cpu/attention.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>

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
  float sum = 0;
  for (int64_t j = 0; j < n_ctx; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
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

}  // namespace

AttendHeadFn AttendHeadAvx2() { return &AttendAvx2; }

}  // namespace fak::cpu
#else
namespace fak::cpu {
AttendHeadFn AttendHeadAvx2() { return nullptr; }
}  // namespace fak::cpu
#endif
