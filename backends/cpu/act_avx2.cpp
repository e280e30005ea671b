// AVX2 element-wise kernels: SwiGLU's silu(g) * u with the exp of backends/cpu/exp.h, 8 lanes at a
// time and the scalar form for the tail (the same bits either way). Compiled with its own flags.
#include "backends/cpu/act.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backends/cpu/exp_avx2.h"

namespace fak::cpu {
namespace {

void SiluMulAvx2(float* g, const float* u, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    const __m256 y =
        _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(u + i));
    _mm256_storeu_ps(g + i, y);
  }
  for (; i < n; ++i) g[i] = SiluMulOne(g[i], u[i]);
}

}  // namespace

SiluMulFn SiluMulAvx2Fn() { return &SiluMulAvx2; }

}  // namespace fak::cpu
#else
namespace fak::cpu {
SiluMulFn SiluMulAvx2Fn() { return nullptr; }
}  // namespace fak::cpu
#endif
