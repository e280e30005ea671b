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
void FillAvx512ActQuant(KernelTable* t);
void FillNeonMatVec(KernelTable* t);
void FillNeonMatMul(KernelTable* t);

}  // namespace fak::cpu
