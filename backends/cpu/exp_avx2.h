// The 8-lane form of ExpFast (backends/cpu/exp.h): the same operations lane by lane. Included only by
// translation units compiled with AVX2 flags; internal linkage.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/exp.h"

namespace fak::cpu {
namespace {

inline __m256 Exp8(__m256 x) {
  // vmaxps/vminps return their second operand when either is NaN: x second, so a NaN stays NaN as in
  // the scalar form (a NaN score or gate must not turn into a finite weight).
  x = _mm256_max_ps(_mm256_set1_ps(kExpMin), x);
  x = _mm256_min_ps(_mm256_set1_ps(kExpMax), x);
  const __m256 round = _mm256_set1_ps(kRound);
  const __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), round), round);
  __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Hi)));
  r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Lo)));
  __m256 p = _mm256_set1_ps(kExpP0);
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpP1));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpP2));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpP3));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpP4));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpP5));
  const __m256 y =
      _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r), _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
}

// Softmax numerators: s[j] = exp(s[j] - max) for j < n (8 lanes at a time, the tail by ExpFast: the same
// bits either way); returns their sum, added in j order. Shared by the attention kernels.
inline float ExpMinusMaxSum(float* s, int64_t n, float max) {
  int64_t j = 0;
  const __m256 m = _mm256_set1_ps(max);
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(s + j, Exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), m)));
  for (; j < n; ++j) s[j] = ExpFast(s[j] - max);
  float sum = 0;
  for (j = 0; j < n; ++j) sum += s[j];
  return sum;
}

}  // namespace
}  // namespace fak::cpu
