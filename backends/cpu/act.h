// Element-wise activation kernels. The scalar forms in backends/cpu/exp.h are the reference; SIMD
// forms give the same bits.
#pragma once

#include <cstdint>

namespace fak::cpu {

// g = silu(g) * u over n elements.
using SiluMulFn = void (*)(float* g, const float* u, int64_t n);
// nullptr when not compiled for this target.
SiluMulFn SiluMulAvx2Fn();

}  // namespace fak::cpu
