// AVX2's int8 dot for the 256-bit bodies of x86_ymm_body.h. Included only by translation units compiled
// with AVX2 flags, before x86_ymm_body.h; internal linkage, like the bodies.
#pragma once

#include <immintrin.h>

namespace fak::cpu {
namespace {

// AVX2 has no int8 dot instruction: pairs into int16 (no saturation for the callers' ranges), then
// pairs of int16 into int32.
inline __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

}  // namespace
}  // namespace fak::cpu
