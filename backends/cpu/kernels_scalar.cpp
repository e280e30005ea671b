// The scalar table: the quant/ reference dots, row by row. Always compiled; it is what every other
// table is tested against.
#include "backends/cpu/isa_tables.h"  // FillScalarPacked, Slot
#include "backends/cpu/kernels.h"
#include "backends/cpu/ops.h"  // SiluMul
#include "quant/f16.h"         // VecDotF16F32, VecDotBf16F32, VecDotF32F32
#include "quant/q4_k.h"        // VecDotQ4_KQ8_K
#include "quant/q6_k.h"        // VecDotQ6_KQ8_K
#include "quant/q8_0.h"        // VecDotQ8_0Q8_0

namespace fak::cpu {
namespace {

float DotF16(int64_t n, const uint8_t* w, const uint8_t* a) {
  return VecDotF16F32(n, reinterpret_cast<const uint16_t*>(w), reinterpret_cast<const float*>(a));
}
float DotBf16(int64_t n, const uint8_t* w, const uint8_t* a) {
  return VecDotBf16F32(n, reinterpret_cast<const uint16_t*>(w), reinterpret_cast<const float*>(a));
}
float DotF32(int64_t n, const uint8_t* w, const uint8_t* a) {
  return VecDotF32F32(n, reinterpret_cast<const float*>(w), reinterpret_cast<const float*>(a));
}
float DotQ8_0(int64_t n, const uint8_t* w, const uint8_t* a) {
  return VecDotQ8_0Q8_0(n, reinterpret_cast<const BlockQ8_0*>(w), reinterpret_cast<const BlockQ8_0*>(a));
}
float DotQ4_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  return VecDotQ4_KQ8_K(n, reinterpret_cast<const BlockQ4_K*>(w), reinterpret_cast<const BlockQ8_K*>(a));
}
float DotQ6_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  return VecDotQ6_KQ8_K(n, reinterpret_cast<const BlockQ6_K*>(w), reinterpret_cast<const BlockQ8_K*>(a));
}

template <float (*kDot)(int64_t, const uint8_t*, const uint8_t*)>
void MatVec(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, float* y, int64_t r0,
            int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) y[r] = kDot(n, w + r * row_bytes, act);
}

template <float (*kDot)(int64_t, const uint8_t*, const uint8_t*)>
void MatMul(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, size_t act_stride,
            int64_t n_tokens, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = r0; r < r1; ++r) y[t * ldy + r] = kDot(n, w + r * row_bytes, act + t * act_stride);
  }
}

int64_t Int8Peak(int64_t iterations) {
  int32_t acc[16] = {};
  int8_t a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = static_cast<int8_t>(i * 7 - 50), b[i] = static_cast<int8_t>(3 - i);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < 16; ++i) acc[i] += a[i] * b[i];
    asm volatile("" : : "r"(acc) : "memory");
  }
  return iterations * 16 + (acc[0] & 0);
}

KernelTable MakeTable() {
  KernelTable t;
  t.isa = Isa::kScalar;
  t.matvec[Slot(GgmlType::kF16)] = MatVec<DotF16>, t.matmul[Slot(GgmlType::kF16)] = MatMul<DotF16>;
  t.matvec[Slot(GgmlType::kBF16)] = MatVec<DotBf16>, t.matmul[Slot(GgmlType::kBF16)] = MatMul<DotBf16>;
  t.matvec[Slot(GgmlType::kQ8_0)] = MatVec<DotQ8_0>, t.matmul[Slot(GgmlType::kQ8_0)] = MatMul<DotQ8_0>;
  t.matvec[Slot(GgmlType::kQ4_K)] = MatVec<DotQ4_K>, t.matmul[Slot(GgmlType::kQ4_K)] = MatMul<DotQ4_K>;
  t.matvec[Slot(GgmlType::kQ6_K)] = MatVec<DotQ6_K>, t.matmul[Slot(GgmlType::kQ6_K)] = MatMul<DotQ6_K>;
  t.matvec[Slot(GgmlType::kF32)] = MatVec<DotF32>, t.matmul[Slot(GgmlType::kF32)] = MatMul<DotF32>;
  FillScalarPacked(&t);
  t.int8_peak = Int8Peak;
  t.attend = AttendHeadPortable;
  t.attend_group = AttendGroupPortable;
  t.silu_mul = SiluMul;
  return t;
}

}  // namespace

const KernelTable* ScalarKernels() {
  static const KernelTable table = MakeTable();
  return &table;
}

}  // namespace fak::cpu
