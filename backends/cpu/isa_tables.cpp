#include "backends/cpu/isa_tables.h"

namespace fak::cpu {
namespace {

KernelTable Build(Isa isa, void (*fill_matvec)(KernelTable*), void (*fill_matmul)(KernelTable*)) {
  KernelTable t = *ScalarKernels();  // any entry an ISA leaves empty falls back to the reference
  t.isa = isa;
  fill_matvec(&t);
  fill_matmul(&t);
  if (isa != Isa::kNeon && AttendHeadAvx2() != nullptr) t.attend = AttendHeadAvx2();  // AVX2+FMA+F16C
  if (isa != Isa::kNeon && SiluMulAvx2Fn() != nullptr) t.silu_mul = SiluMulAvx2Fn();
  if (isa != Isa::kNeon && AttendGroupAvx2() != nullptr) t.attend_group = AttendGroupAvx2();
  return t;
}

}  // namespace

#if defined(__x86_64__)
const KernelTable* Avx2Kernels() {
  static const KernelTable table = [] {
    KernelTable t = Build(Isa::kAvx2, FillAvx2MatVec, FillAvx2MatMul);
    FillAvx2Packed(&t);
    FillAvx2ActQuant(&t);
    return t;
  }();
  return &table;
}
const KernelTable* Avx512Kernels() {
  static const KernelTable table = [] {
    KernelTable t = Build(Isa::kAvx512, FillAvx512MatVec, FillAvx512MatMul);
    FillAvx512Packed(&t);
    FillAvx512ActQuant(&t);
    if (AttendGroupAvx512() != nullptr) t.attend_group = AttendGroupAvx512();
    return t;
  }();
  return &table;
}
const KernelTable* NeonKernels() { return nullptr; }
#elif defined(__aarch64__)
const KernelTable* Avx2Kernels() { return nullptr; }
const KernelTable* Avx512Kernels() { return nullptr; }
const KernelTable* NeonKernels() {
  static const KernelTable table = [] {
    KernelTable t = Build(Isa::kNeon, FillNeonMatVec, FillNeonMatMul);
    FillNeonPacked(&t);
    return t;
  }();
  return &table;
}
#else
const KernelTable* Avx2Kernels() { return nullptr; }
const KernelTable* Avx512Kernels() { return nullptr; }
const KernelTable* NeonKernels() { return nullptr; }
#endif

}  // namespace fak::cpu
