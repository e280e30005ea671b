// AVX2 activation quantizers for the packed kernels, bit-identical to QuantizeRowQ8_0 / QuantizeRowQ8_K
// through QuantizePackedActivations, as act_quant_avx512.cpp's are: the same operations per element
// (amax = fmax over |x| with NaN ignored, d = amax / 127, id = 1 / d or 0, q = clamp(nearbyint(x * id),
// -127, 127) with NaN going to -127), 8 lanes at a time. vmaxps / vminps return their second operand
// when either is NaN, which is how the operands are ordered. Without them an AVX2 machine quantized a
// prompt's activations with the reference's scalar fmaxf / nearbyintf calls: 17% of a 256-token
// prefill of the 1.5B geometry on two Zen 3 cores (docs/bench/cpu-scaling.md).
//
// Internal linkage only, no inline functions from shared headers (see x86_ymm_body.h for why).
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/isa_tables.h"
#include "backends/cpu/packed.h"
#include "quant/f16.h"   // Fp32ToFp16 (out of line)
#include "quant/q8_k.h"  // BlockQ8_K

namespace fak::cpu {
namespace {

// Lane-wise fmax(acc, |x|) with NaN in x ignored.
__m256 AbsMax(__m256 acc, __m256 x) {
  const __m256 ax = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)));
  return _mm256_max_ps(ax, acc);
}

// The largest of 8 lanes, none of them NaN (AbsMax keeps NaN out): exact in any order.
float MaxOf(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

int32_t SumOf(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 8 quants of x * id as int32 lanes.
__m256i Quantize8(__m256 x, __m256 id) {
  __m256 q = _mm256_round_ps(_mm256_mul_ps(x, id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  q = _mm256_max_ps(q, _mm256_set1_ps(-127.0f));  // NaN -> -127
  q = _mm256_min_ps(q, _mm256_set1_ps(127.0f));
  return _mm256_cvtps_epi32(q);
}

// 32 int32 lanes in [-127, 127] (q0 the first 8) as 32 bytes in order. The two packs interleave the
// 128-bit halves: dwords {q0 lo, q1 lo, q2 lo, q3 lo | q0 hi, q1 hi, q2 hi, q3 hi}.
void Store32(int8_t* dst, __m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                      _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

float InverseScale(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

// 32 (Q8_0) or 256 (Q8_K) values: quants into qs, the sums of each 16 into sum16; returns the scale d.
template <int kN>
float QuantizeRun(const float* x, int8_t* qs, int32_t* sum16) {
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < kN / 8; ++i) m = AbsMax(m, _mm256_loadu_ps(x + 8 * i));
  const float d = MaxOf(m) / 127.0f;
  const __m256 id = _mm256_set1_ps(InverseScale(d));
  for (int i = 0; i < kN / 32; ++i) {
    const float* xi = x + 32 * i;
    const __m256i q0 = Quantize8(_mm256_loadu_ps(xi), id), q1 = Quantize8(_mm256_loadu_ps(xi + 8), id),
                  q2 = Quantize8(_mm256_loadu_ps(xi + 16), id), q3 = Quantize8(_mm256_loadu_ps(xi + 24), id);
    Store32(qs + 32 * i, q0, q1, q2, q3);
    sum16[2 * i] = SumOf(_mm256_add_epi32(q0, q1));
    sum16[2 * i + 1] = SumOf(_mm256_add_epi32(q2, q3));
  }
  return d;
}

void QuantizeQ8_0(const float* x, int64_t n, int64_t t, int64_t n_tokens, void* out) {
  auto* a = static_cast<ActQ8_0*>(out);
  for (int64_t b = 0; b < n / 32; ++b) {
    ActQ8_0& o = a[b * n_tokens + t];
    int32_t sum16[2];
    const float d = QuantizeRun<32>(x + 32 * b, o.qs, sum16);
    o.d = _cvtsh_ss(Fp32ToFp16(d));
    o.corr = -128 * (sum16[0] + sum16[1]);
  }
}

void QuantizeQ4_K(const float* x, int64_t n, int64_t t, int64_t n_tokens, void* out) {
  auto* a = static_cast<ActQ8_K*>(out);
  for (int64_t b = 0; b < n / 256; ++b) {
    ActQ8_K& o = a[b * n_tokens + t];
    int32_t bs[16];
    o.d = QuantizeRun<256>(x + 256 * b, o.qs, bs);
    for (int j = 0; j < 8; ++j) o.bsum32[j] = static_cast<int16_t>(bs[2 * j] + bs[2 * j + 1]);
    o.pad[0] = o.pad[1] = o.pad[2] = 0;
  }
}

void QuantizeQ6_K(const float* x, int64_t n, int64_t t, int64_t n_tokens, void* out) {
  auto* a = static_cast<BlockQ8_K*>(out);
  for (int64_t b = 0; b < n / 256; ++b) {
    BlockQ8_K& o = a[b * n_tokens + t];
    int32_t bs[16];
    o.d = QuantizeRun<256>(x + 256 * b, o.qs, bs);
    for (int j = 0; j < 16; ++j) o.bsums[j] = static_cast<int16_t>(bs[j]);
  }
}

}  // namespace

void FillAvx2ActQuant(KernelTable* t) {
  t->quantize_packed[Slot(GgmlType::kQ8_0)] = QuantizeQ8_0;
  t->quantize_packed[Slot(GgmlType::kQ4_K)] = QuantizeQ4_K;
  t->quantize_packed[Slot(GgmlType::kQ6_K)] = QuantizeQ6_K;
}

}  // namespace fak::cpu
