// AVX-512 VNNI's int8 dot for the 256-bit bodies of x86_ymm_body.h. Included only by translation units
// compiled with AVX-512 flags, before x86_ymm_body.h; internal linkage, like the bodies.
#pragma once

#include <immintrin.h>

namespace fak::cpu {
namespace {

// VNNI on 256-bit registers (AVX512VL): one vpdpbusd.
inline __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }

}  // namespace
}  // namespace fak::cpu
