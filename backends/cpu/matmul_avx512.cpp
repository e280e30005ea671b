// Matrix-matrix (prefill) table for AVX-512: register tiles of weight rows x tokens from the 256-bit
// bodies over VNNI's int8 dot, weights loaded or unpacked once and reused for every token of the tile.
// GCC 12's AVX-512 headers trip -Wuninitialized inside _mm512_reduce_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backends/cpu/isa_tables.h"
#include "backends/cpu/x86_dot_avx512.h"  // DotU8S8
#include "backends/cpu/x86_ymm_body.h"    // FillYmm

namespace fak::cpu {
namespace {

int64_t Int8Peak(int64_t iterations) {
  // 12 independent accumulators cover vpdpbusd's latency on two pipes.
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  __m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2);
  __m512i a3 = _mm512_set1_epi32(3), a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5);
  __m512i a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7), a8 = _mm512_set1_epi32(8);
  __m512i a9 = _mm512_set1_epi32(9), a10 = _mm512_set1_epi32(10), a11 = _mm512_set1_epi32(11);
  for (int64_t it = 0; it < iterations; ++it) {
    a0 = _mm512_dpbusd_epi32(a0, u, s), a1 = _mm512_dpbusd_epi32(a1, u, s);
    a2 = _mm512_dpbusd_epi32(a2, u, s), a3 = _mm512_dpbusd_epi32(a3, u, s);
    a4 = _mm512_dpbusd_epi32(a4, u, s), a5 = _mm512_dpbusd_epi32(a5, u, s);
    a6 = _mm512_dpbusd_epi32(a6, u, s), a7 = _mm512_dpbusd_epi32(a7, u, s);
    a8 = _mm512_dpbusd_epi32(a8, u, s), a9 = _mm512_dpbusd_epi32(a9, u, s);
    a10 = _mm512_dpbusd_epi32(a10, u, s), a11 = _mm512_dpbusd_epi32(a11, u, s);
  }
  __m512i sum = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                                 _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
  sum = _mm512_add_epi32(sum, _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
  volatile int sink = _mm512_reduce_add_epi32(sum);
  (void)sink;
  return iterations * 12 * 64;
}

}  // namespace

void FillAvx512MatMul(KernelTable* t) {
  FillYmm</*kMatVec=*/false>(t);
  t->int8_peak = Int8Peak;
}

}  // namespace fak::cpu
