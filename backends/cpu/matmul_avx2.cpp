// Matrix-matrix (prefill) kernels for avx2: register tiles of weight rows x tokens, weights loaded or
// unpacked once and reused for every token of the tile.
#include <immintrin.h>

#include "backends/cpu/isa_tables.h"

namespace fak::cpu {
namespace {
// AVX2 has no int8 dot instruction: pairs into int16 (no saturation for the callers' ranges), then
// pairs of int16 into int32.
inline __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
}  // namespace
}  // namespace fak::cpu

#include "backends/cpu/x86_ymm_body.h"

namespace fak::cpu {
namespace {

void MatMulQ8_0(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, size_t act_stride,
                int64_t n_tokens, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  RunRowTiles<BlockQ8_0, Q8_0Tile>(w, row_bytes, n / kQK8_0, act, act_stride, n_tokens, y, ldy, r0, r1);
}
void MatMulQ4_K(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, size_t act_stride,
                int64_t n_tokens, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  MatMulQ4_KYmm(w, row_bytes, n / kQK_K, act, act_stride, n_tokens, y, ldy, r0, r1);
}
void MatMulQ6_K(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, size_t act_stride,
                int64_t n_tokens, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  MatMulQ6_KYmm(w, row_bytes, n / kQK_K, act, act_stride, n_tokens, y, ldy, r0, r1);
}

int64_t Int8Peak(int64_t iterations) {
  const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1), a2 = _mm256_set1_epi32(2);
  __m256i a3 = _mm256_set1_epi32(3), a4 = _mm256_set1_epi32(4), a5 = _mm256_set1_epi32(5);
  for (int64_t it = 0; it < iterations; ++it) {
    a0 = DotU8S8(a0, u, s), a1 = DotU8S8(a1, u, s), a2 = DotU8S8(a2, u, s);
    a3 = DotU8S8(a3, u, s), a4 = DotU8S8(a4, u, s), a5 = DotU8S8(a5, u, s);
    asm volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));
  }
  (void)ones;
  volatile int sink = HsumI32(_mm256_add_epi32(
      _mm256_add_epi32(a0, a1), _mm256_add_epi32(_mm256_add_epi32(a2, a3), _mm256_add_epi32(a4, a5))));
  (void)sink;
  return iterations * 6 * 32;
}

}  // namespace

void FillAvx2MatMul(KernelTable* t) {
  t->matmul[Slot(GgmlType::kF16)] = MatMulHalfYmm<0>;
  t->matmul[Slot(GgmlType::kBF16)] = MatMulHalfYmm<1>;
  t->matmul[Slot(GgmlType::kF32)] = MatMulHalfYmm<2>;
  t->matmul[Slot(GgmlType::kQ8_0)] = MatMulQ8_0;
  t->matmul[Slot(GgmlType::kQ4_K)] = MatMulQ4_K;
  t->matmul[Slot(GgmlType::kQ6_K)] = MatMulQ6_K;
  t->int8_peak = Int8Peak;
}

}  // namespace fak::cpu
