// Matrix-vector (decode) kernels for NEON with dotprod.
#include "backends/cpu/isa_tables.h"
#include "backends/cpu/neon_body.h"

namespace fak::cpu {
namespace {

template <template <int> class Dot>
void MatVec(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, float* y, int64_t r0,
            int64_t r1) {
  RunTiles<Dot>(w, row_bytes, n, act, 0, 1, y, 0, r0, r1);
}

}  // namespace

void FillNeonMatVec(KernelTable* t) {
  t->matvec[Slot(GgmlType::kF16)] = MatVec<F16Dot>;
  t->matvec[Slot(GgmlType::kBF16)] = MatVec<Bf16Dot>;
  t->matvec[Slot(GgmlType::kQ8_0)] = MatVec<Q8_0Dot>;
  t->matvec[Slot(GgmlType::kQ4_K)] = MatVec<Q4_KDot>;
  t->matvec[Slot(GgmlType::kQ6_K)] = MatVec<Q6_KDot>;
}

}  // namespace fak::cpu
