// Matrix-matrix (prefill) kernels for avx512: register tiles of weight rows x tokens, weights loaded or
// unpacked once and reused for every token of the tile.
#include <immintrin.h>

#include "backends/cpu/isa_tables.h"

namespace fak::cpu {
namespace {
// AVX-512 VNNI on 256-bit registers: one vpdpbusd.
inline __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
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

}  // namespace

void FillAvx512MatMul(KernelTable* t) {
  t->matmul[static_cast<int>(WeightFormat::kF16)] = MatMulHalfYmm<false>;
  t->matmul[static_cast<int>(WeightFormat::kBF16)] = MatMulHalfYmm<true>;
  t->matmul[static_cast<int>(WeightFormat::kQ8_0)] = MatMulQ8_0;
  t->matmul[static_cast<int>(WeightFormat::kQ4_K)] = MatMulQ4_K;
  t->matmul[static_cast<int>(WeightFormat::kQ6_K)] = MatMulQ6_K;
}

}  // namespace fak::cpu
