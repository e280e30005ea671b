// AVX-512 activation quantizers for the packed kernels, bit-identical to QuantizeRowQ8_0 / QuantizeRowQ8_K
// (the reference's scalar fmaxf / fminf / nearbyintf calls cost more than half of a prefill's matmul
// time otherwise). Same operations per element: amax = fmax over |x| (NaN ignored), d = amax / 127,
// id = 1 / d (0 when d is 0), q = clamp(nearbyint(x * id), -127, 127) with NaN going to -127 as
// fmax(-127, NaN) does. vmaxps / vminps return their second operand when either is NaN, which is how
// the operands are ordered below.
//
// Internal linkage only, no inline functions from shared headers (see x86_ymm_body.h for why).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/isa_tables.h"
#include "backends/cpu/packed.h"
#include "quant/f16.h"   // Fp32ToFp16 (out of line)
#include "quant/q8_k.h"  // BlockQ8_K

namespace fak::cpu {
namespace {

// Lane-wise fmax(acc, |x|) with NaN in x ignored.
inline __m512 AbsMax(__m512 acc, __m512 x) {
  const __m512 ax =
      _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF)));
  return _mm512_max_ps(ax, acc);
}

// 16 quants of x * id as int32 lanes.
inline __m512i Quantize16(__m512 x, __m512 id) {
  __m512 q = _mm512_roundscale_ps(_mm512_mul_ps(x, id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  q = _mm512_max_ps(q, _mm512_set1_ps(-127.0f));  // NaN -> -127
  q = _mm512_min_ps(q, _mm512_set1_ps(127.0f));
  return _mm512_cvtps_epi32(q);
}

inline float InverseScale(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

void QuantizeQ8_0(const float* x, int64_t n, int64_t t, int64_t n_tokens, void* out) {
  auto* a = static_cast<ActQ8_0*>(out);
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(AbsMax(AbsMax(_mm512_setzero_ps(), x0), x1));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(InverseScale(d));
    const __m512i q0 = Quantize16(x0, id), q1 = Quantize16(x1, id);
    ActQ8_0& o = a[b * n_tokens + t];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o.qs), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o.qs + 16), _mm512_cvtepi32_epi8(q1));
    o.d = _cvtsh_ss(Fp32ToFp16(d));
    o.corr = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

// One Q8_K super-block: quants, scale and the 16 sums of 16.
inline void QuantizeSuperBlock(const float* x, int8_t* qs, float* d_out, int32_t bsum16[16]) {
  __m512 m = _mm512_setzero_ps();
  for (int i = 0; i < 16; ++i) m = AbsMax(m, _mm512_loadu_ps(x + 16 * i));
  const float d = _mm512_reduce_max_ps(m) / 127.0f;
  const __m512 id = _mm512_set1_ps(InverseScale(d));
  for (int i = 0; i < 16; ++i) {
    const __m512i q = Quantize16(_mm512_loadu_ps(x + 16 * i), id);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16 * i), _mm512_cvtepi32_epi8(q));
    bsum16[i] = _mm512_reduce_add_epi32(q);
  }
  *d_out = d;
}

void QuantizeQ4_K(const float* x, int64_t n, int64_t t, int64_t n_tokens, void* out) {
  auto* a = static_cast<ActQ8_K*>(out);
  for (int64_t b = 0; b < n / 256; ++b) {
    ActQ8_K& o = a[b * n_tokens + t];
    int32_t bs[16];
    QuantizeSuperBlock(x + 256 * b, o.qs, &o.d, bs);
    for (int j = 0; j < 8; ++j) o.bsum32[j] = static_cast<int16_t>(bs[2 * j] + bs[2 * j + 1]);
    o.pad[0] = o.pad[1] = o.pad[2] = 0;
  }
}

void QuantizeQ6_K(const float* x, int64_t n, int64_t t, int64_t n_tokens, void* out) {
  auto* a = static_cast<BlockQ8_K*>(out);
  for (int64_t b = 0; b < n / 256; ++b) {
    BlockQ8_K& o = a[b * n_tokens + t];
    int32_t bs[16];
    QuantizeSuperBlock(x + 256 * b, o.qs, &o.d, bs);
    for (int j = 0; j < 16; ++j) o.bsums[j] = static_cast<int16_t>(bs[j]);
  }
}

}  // namespace

void FillAvx512ActQuant(KernelTable* t) {
  t->quantize_packed[Slot(GgmlType::kQ8_0)] = QuantizeQ8_0;
  t->quantize_packed[Slot(GgmlType::kQ4_K)] = QuantizeQ4_K;
  t->quantize_packed[Slot(GgmlType::kQ6_K)] = QuantizeQ6_K;
}

}  // namespace fak::cpu
