// Internal: each ISA translation unit fills its part of a KernelTable. Only called after the CPU has
// been checked to run that ISA.
#pragma once

#include "backends/cpu/kernels.h"

namespace fak::cpu {

// KernelSlot(type) as a compile-time constant for the table fillers; a type without kernels does not
// compile. Nothing of it is emitted, so ISA translation units may call it (see x86_ymm_body.h).
consteval int Slot(GgmlType type) { return HasKernels(type) ? KernelSlot(type) : throw "no kernel slot"; }

// The plain-C++ packed kernels (every table starts from them; not native).
void FillScalarPacked(KernelTable* t);
void FillAvx2MatVec(KernelTable* t);
void FillAvx2MatMul(KernelTable* t);
void FillAvx512MatVec(KernelTable* t);
void FillAvx512MatMul(KernelTable* t);
void FillAvx512Packed(KernelTable* t);
// AVX2 kernels over the packed layout.
void FillAvx2Packed(KernelTable* t);
void FillNeonPacked(KernelTable* t);
// SIMD activation quantizers for the packed kernels (the scalar table's are the reference's).
void FillAvx2ActQuant(KernelTable* t);
void FillAvx512ActQuant(KernelTable* t);
void FillNeonMatVec(KernelTable* t);
void FillNeonMatMul(KernelTable* t);

// For the SIMD bodies (x86_ymm_body.h, neon_body.h), whose matrix-matrix kernels also serve decode.
// Internal linkage: instantiated with each ISA translation unit's flags, never shared between them.
namespace {

// Decode through a matrix-matrix kernel: one token, so the compiler folds its token tiles away.
template <MatMulFn kMatMul>
void OneToken(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, float* y, int64_t r0,
              int64_t r1) {
  kMatMul(w, row_bytes, n, act, /*act_stride=*/0, /*n_tokens=*/1, y, /*ldy=*/0, r0, r1);
}

// Sets kType's matvec entry (kMatVec) or its matmul entry to kMatMul; a translation unit instantiates
// only the half it fills.
template <bool kMatVec, GgmlType kType, MatMulFn kMatMul>
void SetEntry(KernelTable* t) {
  if constexpr (kMatVec) {
    t->matvec[Slot(kType)] = OneToken<kMatMul>;
  } else {
    t->matmul[Slot(kType)] = kMatMul;
  }
}

}  // namespace
}  // namespace fak::cpu
