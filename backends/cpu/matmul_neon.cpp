// Matrix-matrix (prefill) table for NEON with dotprod: neon_body.h's 1 row x 4 token tiles.
#include <arm_neon.h>

#include "backends/cpu/isa_tables.h"
#include "backends/cpu/neon_body.h"  // FillNeon

namespace fak::cpu {
namespace {

int64_t Int8Peak(int64_t iterations) {
  const int8x16_t u = vdupq_n_s8(3), s = vdupq_n_s8(-2);
  int32x4_t a0 = vdupq_n_s32(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (int64_t it = 0; it < iterations; ++it) {
    a0 = vdotq_s32(a0, u, s), a1 = vdotq_s32(a1, u, s), a2 = vdotq_s32(a2, u, s), a3 = vdotq_s32(a3, u, s);
    a4 = vdotq_s32(a4, u, s), a5 = vdotq_s32(a5, u, s), a6 = vdotq_s32(a6, u, s), a7 = vdotq_s32(a7, u, s);
  }
  const int32x4_t sum = vaddq_s32(vaddq_s32(vaddq_s32(a0, a1), vaddq_s32(a2, a3)),
                                  vaddq_s32(vaddq_s32(a4, a5), vaddq_s32(a6, a7)));
  volatile int sink = vaddvq_s32(sum);
  (void)sink;
  return iterations * 8 * 16;
}

}  // namespace

void FillNeonMatMul(KernelTable* t) {
  FillNeon</*kMatVec=*/false>(t);
  t->int8_peak = Int8Peak;
}

}  // namespace fak::cpu
