// NEON (armv8.2-a dotprod) kernels over the packed layout (backends/cpu/packed.h). A group of 16 rows
// is read as four quarters of 4 rows, one int32 lane per row: in every 64-byte line of the layout rows
// 4u..4u+3 hold bytes [16u, 16u + 16), in every f16 array bytes [8u, 8u + 8). sdot adds 4 s8 x s8
// products into each lane: q8_0's quants are stored as q + 128 and flipped back to q first, the
// k-quants' quants are 0..15 or 0..63. The integer sums equal the reference's (integers, any order),
// and the float steps follow it per lane.
#include <arm_neon.h>

#include <cstring>

#include "backends/cpu/isa_tables.h"
#include "backends/cpu/packed.h"
#include "quant/f16.h"   // Fp32ToFp16 (out of line)
#include "quant/q8_k.h"  // BlockQ8_K

namespace fak::cpu {
namespace {

inline int8x16_t Bcast(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return vreinterpretq_s8_s32(vdupq_n_s32(v));
}
inline uint8x16_t Load16(const uint8_t* p) { return vld1q_u8(p); }
inline float32x4_t Halves(const uint8_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p))));
}

// Stores the first `valid` of 4 lanes.
inline void StoreRows(float* y, float32x4_t v, int valid) {
  if (valid == 4) {
    vst1q_f32(y, v);
    return;
  }
  float tmp[4];
  vst1q_f32(tmp, v);
  for (int i = 0; i < valid; ++i) y[i] = tmp[i];
}

// The rows quarter u of a group holds: rows [r + 4u, r + 4u + 4), clipped to r1.
inline int QuarterRows(int64_t r, int64_t r1, int u) {
  const int64_t n = r1 - r - 4 * u;
  return n <= 0 ? 0 : n >= 4 ? 4 : static_cast<int>(n);
}

// Runs `tile` over each quarter of each group of rows [r0, r1), in token tiles of kT (then the rest).
template <int kT, typename Tile>
inline void ForEachTile(int64_t r0, int64_t r1, int64_t n_tokens, Tile&& tile) {
  for (int64_t r = r0; r < r1; r += kPackRows) {
    for (int u = 0; u < 4; ++u) {
      const int valid = QuarterRows(r, r1, u);
      if (valid == 0) break;
      int64_t t = 0;
      for (; t + kT <= n_tokens; t += kT) tile(r, u, valid, t, kT);
      if (t < n_tokens) tile(r, u, valid, t, static_cast<int>(n_tokens - t));
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// q8_0

template <int T>
inline void TileQ8_0(const uint8_t* group, int u, int64_t nb, const ActQ8_0* act, int64_t n_tokens, float* y,
                     int64_t ldy, int valid) {
  float32x4_t acc[T];
  for (int t = 0; t < T; ++t) acc[t] = vdupq_n_f32(0.0f);
  const uint8x16_t bias = vdupq_n_u8(0x80);
  const uint8_t* pair = group;
  for (int64_t b = 0; b < nb; ++b) {
    // Blocks in pairs: [quants 2 x 512 B][scales 2 x 32 B]; a last odd block stands alone.
    const bool second = (b & 1) != 0;
    const bool alone = !second && b + 1 == nb;
    const uint8_t* quants = pair + (second ? 512 : 0);
    const uint8_t* scales = pair + (alone ? 512 : 1024) + (second ? 32 : 0);
    int32x4_t isum[T];
    for (int t = 0; t < T; ++t) isum[t] = vdupq_n_s32(0);
    const ActQ8_0* a = act + b * n_tokens;
    for (int k = 0; k < 8; ++k) {
      const int8x16_t q = vreinterpretq_s8_u8(veorq_u8(Load16(quants + k * 64 + 16 * u), bias));
      for (int t = 0; t < T; ++t) isum[t] = vdotq_s32(isum[t], q, Bcast(a[t].qs + 4 * k));
    }
    const float32x4_t dw = Halves(scales + 8 * u);
    for (int t = 0; t < T; ++t) {
      const float32x4_t sc = vmulq_f32(dw, vdupq_n_f32(a[t].d));
      acc[t] = vaddq_f32(acc[t], vmulq_f32(sc, vcvtq_f32_s32(isum[t])));
    }
    if (second) pair += 1088;
  }
  for (int t = 0; t < T; ++t) StoreRows(y + t * ldy, acc[t], valid);
}

template <int T>
inline void TileQ8_0Count(int count, const uint8_t* group, int u, int64_t nb, const ActQ8_0* act,
                          int64_t n_tokens, float* y, int64_t ldy, int valid) {
  if constexpr (T > 0) {
    if (count == T) return TileQ8_0<T>(group, u, nb, act, n_tokens, y, ldy, valid);
    TileQ8_0Count<T - 1>(count, group, u, nb, act, n_tokens, y, ldy, valid);
  }
}

void PackedQ8_0(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = n / 32;
  const size_t group_bytes = PackedGroupBytes(GgmlType::kQ8_0, n);
  const auto* a = reinterpret_cast<const ActQ8_0*>(act);
  ForEachTile<4>(r0, r1, n_tokens, [&](int64_t r, int u, int valid, int64_t t, int count) {
    TileQ8_0Count<4>(count, w + (r / kPackRows) * group_bytes, u, nb, a + t, n_tokens,
                     y + t * ldy + r + 4 * u, ldy, valid);
  });
}

// ---------------------------------------------------------------------------------------------------
// q4_k: the 6-bit scales and minimums of 4 rows unpacked once per super-block into int32 lanes.

// A tbl control that builds each dword from bytes (b0, b1, b2, b3) of the same dword; -1 gives 0.
inline uint8x16_t DwordBytes(int b0, int b1, int b2, int b3) {
  uint8_t c[16];
  for (int d = 0; d < 4; ++d) {
    const int bs[4] = {b0, b1, b2, b3};
    for (int i = 0; i < 4; ++i) c[4 * d + i] = bs[i] < 0 ? 0xFF : static_cast<uint8_t>(4 * d + bs[i]);
  }
  return vld1q_u8(c);
}

struct Q4_KScales {
  int32x4_t sc[8], m[8];
  float32x4_t d, dmin;
};

inline void UnpackScales(const uint8_t* sb, int u, Q4_KScales* s) {
  const uint32x4_t s0 = vreinterpretq_u32_u8(Load16(sb + kQ4_KPackScales + 16 * u));
  const uint32x4_t s1 = vreinterpretq_u32_u8(Load16(sb + kQ4_KPackScales + 64 + 16 * u));
  const uint32x4_t s2 = vreinterpretq_u32_u8(Load16(sb + kQ4_KPackScales + 128 + 16 * u));
  const uint32x4_t m3f = vdupq_n_u32(0x3F3F3F3F), m0f = vdupq_n_u32(0x0F0F0F0F),
                   m30 = vdupq_n_u32(0x30303030);
  const uint32x4_t sc_lo = vandq_u32(s0, m3f), m_lo = vandq_u32(s1, m3f);
  const uint32x4_t sc_hi = vorrq_u32(vandq_u32(s2, m0f), vandq_u32(vshrq_n_u32(s0, 2), m30));
  const uint32x4_t m_hi = vorrq_u32(vandq_u32(vshrq_n_u32(s2, 4), m0f), vandq_u32(vshrq_n_u32(s1, 2), m30));
  for (int j = 0; j < 4; ++j) {
    const uint8x16_t pick = DwordBytes(j, -1, -1, -1);
    s->sc[j] = vreinterpretq_s32_u8(vqtbl1q_u8(vreinterpretq_u8_u32(sc_lo), pick));
    s->sc[j + 4] = vreinterpretq_s32_u8(vqtbl1q_u8(vreinterpretq_u8_u32(sc_hi), pick));
    s->m[j] = vreinterpretq_s32_u8(vqtbl1q_u8(vreinterpretq_u8_u32(m_lo), pick));
    s->m[j + 4] = vreinterpretq_s32_u8(vqtbl1q_u8(vreinterpretq_u8_u32(m_hi), pick));
  }
  s->d = Halves(sb + kQ4_KPackD + 8 * u);
  s->dmin = Halves(sb + kQ4_KPackDmin + 8 * u);
}

template <int T>
inline void TileQ4_K(const uint8_t* group, int u, int64_t nb, const ActQ8_K* act, int64_t n_tokens, float* y,
                     int64_t ldy, int valid) {
  float32x4_t acc[T];
  for (int t = 0; t < T; ++t) acc[t] = vdupq_n_f32(0.0f);
  const uint8x16_t low4 = vdupq_n_u8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* sb = group + b * kQ4_KPackBytes;
    Q4_KScales s;
    UnpackScales(sb, u, &s);
    const ActQ8_K* a = act + b * n_tokens;
    int32x4_t isum[T];
    for (int t = 0; t < T; ++t) isum[t] = vdupq_n_s32(0);
    for (int c = 0; c < 4; ++c) {
      int32x4_t alo[T], ahi[T];
      for (int t = 0; t < T; ++t) alo[t] = ahi[t] = vdupq_n_s32(0);
      for (int k = 0; k < 8; ++k) {
        const uint8x16_t v = Load16(sb + kQ4_KPackQs + c * 512 + k * 64 + 16 * u);
        const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(v, low4)),
                        hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
        for (int t = 0; t < T; ++t) {
          alo[t] = vdotq_s32(alo[t], lo, Bcast(a[t].qs + 64 * c + 4 * k));
          ahi[t] = vdotq_s32(ahi[t], hi, Bcast(a[t].qs + 64 * c + 32 + 4 * k));
        }
      }
      for (int t = 0; t < T; ++t) {
        isum[t] =
            vaddq_s32(isum[t], vaddq_s32(vmulq_s32(alo[t], s.sc[2 * c]), vmulq_s32(ahi[t], s.sc[2 * c + 1])));
      }
    }
    for (int t = 0; t < T; ++t) {
      int32x4_t ms = vdupq_n_s32(0);
      for (int j = 0; j < 8; ++j) ms = vmlaq_s32(ms, s.m[j], vdupq_n_s32(a[t].bsum32[j]));
      const float32x4_t ad = vdupq_n_f32(a[t].d);
      const float32x4_t dd = vmulq_f32(ad, s.d), dm = vmulq_f32(ad, s.dmin);
      const float32x4_t part =
          vsubq_f32(vmulq_f32(dd, vcvtq_f32_s32(isum[t])), vmulq_f32(dm, vcvtq_f32_s32(ms)));
      acc[t] = vaddq_f32(acc[t], part);
    }
  }
  for (int t = 0; t < T; ++t) StoreRows(y + t * ldy, acc[t], valid);
}

template <int T>
inline void TileQ4_KCount(int count, const uint8_t* group, int u, int64_t nb, const ActQ8_K* act,
                          int64_t n_tokens, float* y, int64_t ldy, int valid) {
  if constexpr (T > 0) {
    if (count == T) return TileQ4_K<T>(group, u, nb, act, n_tokens, y, ldy, valid);
    TileQ4_KCount<T - 1>(count, group, u, nb, act, n_tokens, y, ldy, valid);
  }
}

void PackedQ4_K(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = n / 256;
  const size_t group_bytes = PackedGroupBytes(GgmlType::kQ4_K, n);
  const auto* a = reinterpret_cast<const ActQ8_K*>(act);
  ForEachTile<2>(r0, r1, n_tokens, [&](int64_t r, int u, int valid, int64_t t, int count) {
    TileQ4_KCount<2>(count, w + (r / kPackRows) * group_bytes, u, nb, a + t, n_tokens,
                     y + t * ldy + r + 4 * u, ldy, valid);
  });
}

// ---------------------------------------------------------------------------------------------------
// q6_k: S = sum_j sc_j * sum q * a - 32 * sum_j sc_j * bsum_j, exact in int32.

template <int T>
inline void TileQ6_K(const uint8_t* group, int u, int64_t nb, const BlockQ8_K* act, int64_t n_tokens,
                     float* y, int64_t ldy, int valid) {
  float32x4_t acc[T];
  for (int t = 0; t < T; ++t) acc[t] = vdupq_n_f32(0.0f);
  const uint8x16_t low4 = vdupq_n_u8(0x0F), low6 = vdupq_n_u8(0x3F), bits45 = vdupq_n_u8(0x30);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* sb = group + b * kQ6_KPackBytes;
    int32x4_t sc[16];
    for (int w = 0; w < 4; ++w) {
      const uint8x16_t v = Load16(sb + kQ6_KPackScales + w * 64 + 16 * u);
      for (int e = 0; e < 4; ++e) {
        sc[4 * w + e] = vshrq_n_s32(vreinterpretq_s32_u8(vqtbl1q_u8(v, DwordBytes(-1, -1, -1, e))), 24);
      }
    }
    const float32x4_t d = Halves(sb + kQ6_KPackD + 8 * u);
    const BlockQ8_K* a = act + b * n_tokens;
    int32x4_t isum[T];
    for (int t = 0; t < T; ++t) isum[t] = vdupq_n_s32(0);
    // Step p yields groups p, 16 + p (the low 6 bits of f1, f2) and 32 + p, 48 + p (a nibble of nb
    // under the top 2 bits of f1, f2): sub-blocks p / 4 + 0, 4, 8, 12.
    for (int jj = 0; jj < 4; ++jj) {
      int32x4_t part[4][T];
      for (int i = 0; i < 4; ++i) {
        for (int t = 0; t < T; ++t) part[i][t] = vdupq_n_s32(0);
      }
      for (int g = 0; g < 4; ++g) {
        const int p = 4 * jj + g;
        const uint8_t* set = sb + kQ6_KPackQuants + p * 192 + 16 * u;
        const uint8x16_t f1 = Load16(set), f2 = Load16(set + 64), nbl = Load16(set + 128);
        const int8x16_t q[4] = {
            vreinterpretq_s8_u8(vandq_u8(f1, low6)), vreinterpretq_s8_u8(vandq_u8(f2, low6)),
            vreinterpretq_s8_u8(vorrq_u8(vandq_u8(nbl, low4), vandq_u8(vshrq_n_u8(f1, 2), bits45))),
            vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(nbl, 4), vandq_u8(vshrq_n_u8(f2, 2), bits45)))};
        for (int i = 0; i < 4; ++i) {
          for (int t = 0; t < T; ++t)
            part[i][t] = vdotq_s32(part[i][t], q[i], Bcast(a[t].qs + 4 * (16 * i + p)));
        }
      }
      for (int i = 0; i < 4; ++i) {
        for (int t = 0; t < T; ++t) isum[t] = vmlaq_s32(isum[t], part[i][t], sc[4 * i + jj]);
      }
    }
    for (int t = 0; t < T; ++t) {
      int32x4_t corr = vdupq_n_s32(0);
      for (int j = 0; j < 16; ++j) corr = vmlaq_s32(corr, sc[j], vdupq_n_s32(a[t].bsums[j]));
      const int32x4_t total = vsubq_s32(isum[t], vshlq_n_s32(corr, 5));
      const float32x4_t dd = vmulq_f32(vdupq_n_f32(a[t].d), d);
      acc[t] = vaddq_f32(acc[t], vmulq_f32(dd, vcvtq_f32_s32(total)));
    }
  }
  for (int t = 0; t < T; ++t) StoreRows(y + t * ldy, acc[t], valid);
}

template <int T>
inline void TileQ6_KCount(int count, const uint8_t* group, int u, int64_t nb, const BlockQ8_K* act,
                          int64_t n_tokens, float* y, int64_t ldy, int valid) {
  if constexpr (T > 0) {
    if (count == T) return TileQ6_K<T>(group, u, nb, act, n_tokens, y, ldy, valid);
    TileQ6_KCount<T - 1>(count, group, u, nb, act, n_tokens, y, ldy, valid);
  }
}

void PackedQ6_K(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = n / 256;
  const size_t group_bytes = PackedGroupBytes(GgmlType::kQ6_K, n);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act);
  ForEachTile<2>(r0, r1, n_tokens, [&](int64_t r, int u, int valid, int64_t t, int count) {
    TileQ6_KCount<2>(count, w + (r / kPackRows) * group_bytes, u, nb, a + t, n_tokens,
                     y + t * ldy + r + 4 * u, ldy, valid);
  });
}

// ---------------------------------------------------------------------------------------------------
// Activation quantizers, bit-identical to QuantizeRowQ8_0 / QuantizeRowQ8_K through
// QuantizePackedActivations (act_quant_avx2.cpp's operations on 4 lanes): fmaxnm / fminnm are C's fmax /
// fmin (a NaN operand gives the other), frintn is nearbyint in the default rounding mode.

inline float32x4_t AbsMax(float32x4_t acc, float32x4_t x) { return vmaxnmq_f32(acc, vabsq_f32(x)); }

// 4 quants of x * id as int32 lanes.
inline int32x4_t Quantize4(float32x4_t x, float32x4_t id) {
  float32x4_t q = vrndnq_f32(vmulq_f32(x, id));
  q = vmaxnmq_f32(q, vdupq_n_f32(-127.0f));  // NaN -> -127
  q = vminnmq_f32(q, vdupq_n_f32(127.0f));
  return vcvtq_s32_f32(q);
}

// 16 int32 lanes in [-127, 127] as 16 bytes in order.
inline int8x16_t Narrow16(int32x4_t q0, int32x4_t q1, int32x4_t q2, int32x4_t q3) {
  const int16x8_t a = vcombine_s16(vmovn_s32(q0), vmovn_s32(q1)),
                  b = vcombine_s16(vmovn_s32(q2), vmovn_s32(q3));
  return vcombine_s8(vmovn_s16(a), vmovn_s16(b));
}

inline float InverseScale(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

// 32 (Q8_0) or 256 (Q8_K) values: quants into qs, the scale d, and the sums of each 16 into sum16.
template <int kN>
inline float QuantizeRun(const float* x, int8_t* qs, int32_t* sum16) {
  float32x4_t m = vdupq_n_f32(0.0f);
  for (int i = 0; i < kN / 4; ++i) m = AbsMax(m, vld1q_f32(x + 4 * i));
  const float d = vmaxnmvq_f32(m) / 127.0f;
  const float32x4_t id = vdupq_n_f32(InverseScale(d));
  for (int i = 0; i < kN / 16; ++i) {
    const float* xi = x + 16 * i;
    const int32x4_t q0 = Quantize4(vld1q_f32(xi), id), q1 = Quantize4(vld1q_f32(xi + 4), id);
    const int32x4_t q2 = Quantize4(vld1q_f32(xi + 8), id), q3 = Quantize4(vld1q_f32(xi + 12), id);
    vst1q_s8(qs + 16 * i, Narrow16(q0, q1, q2, q3));
    sum16[i] = vaddvq_s32(vaddq_s32(vaddq_s32(q0, q1), vaddq_s32(q2, q3)));
  }
  return d;
}

void QuantizeQ8_0(const float* x, int64_t n, int64_t t, int64_t n_tokens, void* out) {
  auto* a = static_cast<ActQ8_0*>(out);
  for (int64_t b = 0; b < n / 32; ++b) {
    ActQ8_0& o = a[b * n_tokens + t];
    int32_t sum16[2];
    const float d = QuantizeRun<32>(x + 32 * b, o.qs, sum16);
    const uint16_t h = Fp32ToFp16(d);
    o.d = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);  // exact
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

void FillNeonPacked(KernelTable* t) {
  t->quantize_packed[Slot(GgmlType::kQ8_0)] = QuantizeQ8_0;
  t->quantize_packed[Slot(GgmlType::kQ4_K)] = QuantizeQ4_K;
  t->quantize_packed[Slot(GgmlType::kQ6_K)] = QuantizeQ6_K;
  t->packed[Slot(GgmlType::kQ8_0)] = PackedQ8_0;
  t->packed[Slot(GgmlType::kQ4_K)] = PackedQ4_K;
  t->packed[Slot(GgmlType::kQ6_K)] = PackedQ6_K;
}

}  // namespace fak::cpu
