// Matrix-matrix (prefill) table for AVX2: register tiles of weight rows x tokens from the 256-bit bodies
// over AVX2's int8 dot, weights loaded or unpacked once and reused for every token of the tile.
#include <immintrin.h>

#include "backends/cpu/isa_tables.h"
#include "backends/cpu/x86_dot_avx2.h"  // DotU8S8
#include "backends/cpu/x86_ymm_body.h"  // FillYmm, HsumI32

namespace fak::cpu {
namespace {

int64_t Int8Peak(int64_t iterations) {
  // Six different u operands, opaque to the compiler on every iteration: with one loop-invariant pair
  // it hoisted vpmaddubsw and vpmaddwd out of the loop and timed the adds alone (2.4x the real rate
  // on a Zen 3 core).
  __m256i u0 = _mm256_set1_epi8(3), u1 = _mm256_set1_epi8(4), u2 = _mm256_set1_epi8(5);
  __m256i u3 = _mm256_set1_epi8(6), u4 = _mm256_set1_epi8(7), u5 = _mm256_set1_epi8(8);
  __m256i s = _mm256_set1_epi8(-2);
  __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1), a2 = _mm256_set1_epi32(2);
  __m256i a3 = _mm256_set1_epi32(3), a4 = _mm256_set1_epi32(4), a5 = _mm256_set1_epi32(5);
  for (int64_t it = 0; it < iterations; ++it) {
    asm volatile("" : "+x"(u0), "+x"(u1), "+x"(u2), "+x"(u3), "+x"(u4), "+x"(u5), "+x"(s));
    a0 = DotU8S8(a0, u0, s), a1 = DotU8S8(a1, u1, s), a2 = DotU8S8(a2, u2, s);
    a3 = DotU8S8(a3, u3, s), a4 = DotU8S8(a4, u4, s), a5 = DotU8S8(a5, u5, s);
    asm volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));
  }
  volatile int sink = HsumI32(_mm256_add_epi32(
      _mm256_add_epi32(a0, a1), _mm256_add_epi32(_mm256_add_epi32(a2, a3), _mm256_add_epi32(a4, a5))));
  (void)sink;
  return iterations * 6 * 32;
}

}  // namespace

void FillAvx2MatMul(KernelTable* t) {
  FillYmm</*kMatVec=*/false>(t);
  t->int8_peak = Int8Peak;
}

}  // namespace fak::cpu
