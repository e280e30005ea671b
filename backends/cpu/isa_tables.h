// Internal: each ISA translation unit fills its part of a KernelTable. Only called after the CPU has
// been checked to run that ISA.
#pragma once

#include "backends/cpu/kernels.h"

namespace fak::cpu {

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
