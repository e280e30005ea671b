// Matrix-vector (decode) kernels for avx512. Decode streams every weight byte once, so these only have
// to keep up with memory bandwidth.
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

void MatVecQ8_0(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, float* y, int64_t r0,
                int64_t r1) {
  RunRowTiles<BlockQ8_0, Q8_0Tile>(w, row_bytes, n / kQK8_0, act, 0, 1, y, 0, r0, r1);
}
void MatVecQ4_K(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, float* y, int64_t r0,
                int64_t r1) {
  MatMulQ4_KYmm(w, row_bytes, n / kQK_K, act, 0, 1, y, 0, r0, r1);
}
void MatVecQ6_K(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, float* y, int64_t r0,
                int64_t r1) {
  MatMulQ6_KYmm(w, row_bytes, n / kQK_K, act, 0, 1, y, 0, r0, r1);
}
template <int kKind>
void MatVecHalf(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, float* y, int64_t r0,
                int64_t r1) {
  MatMulHalfYmm<kKind>(w, row_bytes, n, act, 0, 1, y, 0, r0, r1);
}

}  // namespace

void FillAvx512MatVec(KernelTable* t) {
  t->matvec[Slot(GgmlType::kF16)] = MatVecHalf<0>;
  t->matvec[Slot(GgmlType::kBF16)] = MatVecHalf<1>;
  t->matvec[Slot(GgmlType::kF32)] = MatVecHalf<2>;
  t->matvec[Slot(GgmlType::kQ8_0)] = MatVecQ8_0;
  t->matvec[Slot(GgmlType::kQ4_K)] = MatVecQ4_K;
  t->matvec[Slot(GgmlType::kQ6_K)] = MatVecQ6_K;
}

}  // namespace fak::cpu
