// AVX2 kernels over the packed layout (backends/cpu/packed.h), for machines without AVX-512. A group of
// 16 rows is read as two halves of 8 rows, one ymm lane per row: in every 64-byte line of the layout
// rows 0..7 hold the first 32 bytes and rows 8..15 the last 32, in every f16 array the first and last
// 16 bytes. Without vpdpbusd the 4-byte dots are vpmaddubsw (u8 x s8 pairs into int16) then vpmaddwd
// against ones (int32), both exact here: q8_0 feeds |w| as the u8 operand and the activation with w's
// sign as the s8 one (|w| <= 128, |a| <= 127, pairs <= 32,512), the k-quants' quants are 0..15 or
// 0..63. The integer sums equal the reference's, and the float steps follow it per lane.
//
// Internal linkage only and no standard-library templates (see x86_ymm_body.h for why).
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/isa_tables.h"
#include "backends/cpu/packed.h"
#include "quant/q8_k.h"  // BlockQ8_K

namespace fak::cpu {
namespace {

inline int32_t LoadI32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline __m256i Bcast(const void* p) { return _mm256_set1_epi32(LoadI32(p)); }
inline __m256i Load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256 Halves(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// Sum of 4 u8 x s8 products per int32 lane; exact while no pair of products passes 32,767.
inline __m256i Dot4(__m256i u8, __m256i s8) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1));
}

constexpr int kPrefetchAhead = 9216;
inline void PrefetchLine(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

// Stores the first `valid` of 8 lanes.
inline void StoreRows(float* y, __m256 v, int valid) {
  if (valid == 8) {
    _mm256_storeu_ps(y, v);
    return;
  }
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, v);
  for (int i = 0; i < valid; ++i) y[i] = tmp[i];
}

// The rows a half of a group holds: rows [r, r + 16) of the request, half h, clipped to r1.
inline int HalfRows(int64_t r, int64_t r1, int h) {
  const int64_t n = r1 - r - 8 * h;
  return n <= 0 ? 0 : n >= 8 ? 8 : static_cast<int>(n);
}

// ---------------------------------------------------------------------------------------------------
// q8_0: per block, the 8 dwords of each row's quants; line offset 32 h picks the half.
template <int T>
inline void TileQ8_0(const uint8_t* group, int h, int64_t nb, const ActQ8_0* act, int64_t n_tokens, float* y,
                     int64_t ldy, int valid, bool prefetch) {
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  int64_t b = 0;
  for (const uint8_t* pair = group; b < nb; ++b) {
    // Blocks in pairs: [quants 2 x 512 B][scales 2 x 32 B]; a last odd block stands alone.
    const bool second = (b & 1) != 0;
    const bool alone = !second && b + 1 == nb;
    const uint8_t* quants = pair + (second ? 512 : 0);
    const uint8_t* scales = pair + (alone ? 512 : 1024) + (second ? 32 : 0);
    if (prefetch && h == 0) {
      for (int l = 0; l < 8; ++l) PrefetchLine(quants + l * 64 + kPrefetchAhead);
    }
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    const ActQ8_0* a = act + b * n_tokens;
    for (int k = 0; k < 8; ++k) {
      const __m256i q = _mm256_xor_si256(Load32(quants + k * 64 + 32 * h), bias);  // the signed quants
      const __m256i mag = _mm256_abs_epi8(q);
      for (int t = 0; t < T; ++t) {
        isum[t] = _mm256_add_epi32(isum[t], Dot4(mag, _mm256_sign_epi8(Bcast(a[t].qs + 4 * k), q)));
      }
    }
    const __m256 dw = Halves(scales + 16 * h);
    for (int t = 0; t < T; ++t) {
      const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(a[t].d));
      acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(sc, _mm256_cvtepi32_ps(isum[t])));
    }
    if (second) pair += 1088;
  }
  for (int t = 0; t < T; ++t) StoreRows(y + t * ldy, acc[t], valid);
}

constexpr int kTokensQ8_0 = 6;

// One token (decode): both halves of a group in one pass, so each 64-byte line is read once and the
// activation dword broadcast once for the 16 rows. The same operations per row as TileQ8_0<1>.
inline void TileQ8_0One(const uint8_t* group, int64_t nb, const ActQ8_0* act, float* y, int valid0,
                        int valid1) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  int64_t b = 0;
  for (const uint8_t* pair = group; b < nb; ++b) {
    const bool second = (b & 1) != 0;
    const bool alone = !second && b + 1 == nb;
    const uint8_t* quants = pair + (second ? 512 : 0);
    const uint8_t* scales = pair + (alone ? 512 : 1024) + (second ? 32 : 0);
    for (int l = 0; l < 8; ++l) PrefetchLine(quants + l * 64 + kPrefetchAhead);
    __m256i isum0 = _mm256_setzero_si256(), isum1 = _mm256_setzero_si256();
    const ActQ8_0& a = act[b];
    for (int k = 0; k < 8; ++k) {
      const __m256i x = Bcast(a.qs + 4 * k);
      const __m256i q0 = _mm256_xor_si256(Load32(quants + k * 64), bias);
      const __m256i q1 = _mm256_xor_si256(Load32(quants + k * 64 + 32), bias);
      isum0 = _mm256_add_epi32(isum0, Dot4(_mm256_abs_epi8(q0), _mm256_sign_epi8(x, q0)));
      isum1 = _mm256_add_epi32(isum1, Dot4(_mm256_abs_epi8(q1), _mm256_sign_epi8(x, q1)));
    }
    const __m256 ad = _mm256_set1_ps(a.d);
    acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(_mm256_mul_ps(Halves(scales), ad), _mm256_cvtepi32_ps(isum0)));
    acc1 =
        _mm256_add_ps(acc1, _mm256_mul_ps(_mm256_mul_ps(Halves(scales + 16), ad), _mm256_cvtepi32_ps(isum1)));
    if (second) pair += 1088;
  }
  StoreRows(y, acc0, valid0);
  if (valid1 > 0) StoreRows(y + 8, acc1, valid1);
}

template <int T>
inline void TileQ8_0Tail(int count, const uint8_t* group, int h, int64_t nb, const ActQ8_0* act,
                         int64_t n_tokens, float* y, int64_t ldy, int valid, bool prefetch) {
  if constexpr (T > 0) {
    if (count == T) return TileQ8_0<T>(group, h, nb, act, n_tokens, y, ldy, valid, prefetch);
    TileQ8_0Tail<T - 1>(count, group, h, nb, act, n_tokens, y, ldy, valid, prefetch);
  }
}

void PackedQ8_0(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = n / 32;
  const size_t group_bytes = PackedGroupBytes(GgmlType::kQ8_0, n);
  const auto* a = reinterpret_cast<const ActQ8_0*>(act);
  for (int64_t r = r0; r < r1; r += kPackRows) {
    const uint8_t* group = w + (r / kPackRows) * group_bytes;
    if (n_tokens == 1) {
      TileQ8_0One(group, nb, a, y + r, HalfRows(r, r1, 0), HalfRows(r, r1, 1));
      continue;
    }
    for (int h = 0; h < 2; ++h) {
      const int valid = HalfRows(r, r1, h);
      if (valid == 0) break;
      int64_t t = 0;
      for (; t + kTokensQ8_0 <= n_tokens; t += kTokensQ8_0) {
        TileQ8_0<kTokensQ8_0>(group, h, nb, a + t, n_tokens, y + t * ldy + r + 8 * h, ldy, valid, t == 0);
      }
      if (t < n_tokens) {
        TileQ8_0Tail<kTokensQ8_0 - 1>(static_cast<int>(n_tokens - t), group, h, nb, a + t, n_tokens,
                                      y + t * ldy + r + 8 * h, ldy, valid, t == 0);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// q4_k: the 6-bit scales and minimums of 8 rows unpacked once per super-block into int32 lanes
// (sc_j) and int16 pairs (m_2k, m_2k+1), as the AVX-512 kernel does with zmm.

// A vpshufb control that builds each dword from bytes (b0, b1, b2, b3) of the same dword; -1 gives 0.
constexpr uint32_t Sel(int d, int b) { return b < 0 ? 0x80u : static_cast<uint32_t>(4 * d + b); }
constexpr int32_t Ctl(int d, int b0, int b1, int b2, int b3) {
  return static_cast<int32_t>(Sel(d, b0) | Sel(d, b1) << 8 | Sel(d, b2) << 16 | Sel(d, b3) << 24);
}
inline __m256i DwordBytes(int b0, int b1, int b2, int b3) {
  const __m128i lane = _mm_setr_epi32(Ctl(0, b0, b1, b2, b3), Ctl(1, b0, b1, b2, b3), Ctl(2, b0, b1, b2, b3),
                                      Ctl(3, b0, b1, b2, b3));
  return _mm256_broadcastsi128_si256(lane);
}

struct Q4_KScales {
  __m256i sc[8];
  __m256i mpair[4];
  __m256 d, dmin;
};

inline void UnpackScales(const uint8_t* sb, int h, Q4_KScales* s) {
  const __m256i s0 = Load32(sb + kQ4_KPackScales + 32 * h), s1 = Load32(sb + kQ4_KPackScales + 64 + 32 * h);
  const __m256i s2 = Load32(sb + kQ4_KPackScales + 128 + 32 * h);
  const __m256i m3f = _mm256_set1_epi32(0x3F3F3F3F), m0f = _mm256_set1_epi32(0x0F0F0F0F);
  const __m256i m30 = _mm256_set1_epi32(0x30303030);
  const __m256i sc_lo = _mm256_and_si256(s0, m3f);
  const __m256i m_lo = _mm256_and_si256(s1, m3f);
  const __m256i sc_hi =
      _mm256_or_si256(_mm256_and_si256(s2, m0f), _mm256_and_si256(_mm256_srli_epi32(s0, 2), m30));
  const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(s2, 4), m0f),
                                       _mm256_and_si256(_mm256_srli_epi32(s1, 2), m30));
  for (int j = 0; j < 4; ++j) {
    const __m256i pick = DwordBytes(j, -1, -1, -1);
    s->sc[j] = _mm256_shuffle_epi8(sc_lo, pick);
    s->sc[j + 4] = _mm256_shuffle_epi8(sc_hi, pick);
  }
  const __m256i pair0 = DwordBytes(0, -1, 1, -1), pair1 = DwordBytes(2, -1, 3, -1);
  s->mpair[0] = _mm256_shuffle_epi8(m_lo, pair0);
  s->mpair[1] = _mm256_shuffle_epi8(m_lo, pair1);
  s->mpair[2] = _mm256_shuffle_epi8(m_hi, pair0);
  s->mpair[3] = _mm256_shuffle_epi8(m_hi, pair1);
  s->d = Halves(sb + kQ4_KPackD + 16 * h);
  s->dmin = Halves(sb + kQ4_KPackDmin + 16 * h);
}

// A super-block's term for 8 rows and one token: the scaled integer sum less the minimums' part, the
// reference's float steps.
inline __m256 Q4_KTerm(const Q4_KScales& s, const ActQ8_K& a, __m256i isum) {
  const int16_t* bs = a.bsum32;
  __m256i ms = _mm256_madd_epi16(s.mpair[0], Bcast(bs + 0));
  ms = _mm256_add_epi32(ms, _mm256_madd_epi16(s.mpair[1], Bcast(bs + 2)));
  ms = _mm256_add_epi32(ms, _mm256_madd_epi16(s.mpair[2], Bcast(bs + 4)));
  ms = _mm256_add_epi32(ms, _mm256_madd_epi16(s.mpair[3], Bcast(bs + 6)));
  const __m256 ad = _mm256_set1_ps(a.d);
  const __m256 dd = _mm256_mul_ps(ad, s.d), dm = _mm256_mul_ps(ad, s.dmin);
  return _mm256_sub_ps(_mm256_mul_ps(dd, _mm256_cvtepi32_ps(isum)),
                       _mm256_mul_ps(dm, _mm256_cvtepi32_ps(ms)));
}

// isum + lo . sc_lo + hi . sc_hi, the sub-block pair's int16 pair sums widened first.
inline __m256i Q4_KScaled(__m256i isum, __m256i lo16, __m256i hi16, __m256i sc_lo, __m256i sc_hi) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i lo32 = _mm256_madd_epi16(lo16, ones), hi32 = _mm256_madd_epi16(hi16, ones);
  return _mm256_add_epi32(isum,
                          _mm256_add_epi32(_mm256_mullo_epi32(lo32, sc_lo), _mm256_mullo_epi32(hi32, sc_hi)));
}

template <int T>
inline void TileQ4_K(const uint8_t* group, int h, int64_t nb, const ActQ8_K* act, int64_t n_tokens, float* y,
                     int64_t ldy, int valid, bool prefetch) {
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* sb = group + b * kQ4_KPackBytes;
    Q4_KScales s;
    UnpackScales(sb, h, &s);
    const ActQ8_K* a = act + b * n_tokens;
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      // A sub-block's 32 products per row in int16 pairs first (vpmaddubsw), widened once: a pair is at
      // most 2 x 15 x 127 = 3,810 in magnitude, the 8 added at most 30,480, so the sums stay exact.
      __m256i alo[T], ahi[T];
      for (int t = 0; t < T; ++t) alo[t] = ahi[t] = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k) {
        const uint8_t* line = sb + kQ4_KPackQs + c * 512 + k * 64;
        if (prefetch && h == 0) PrefetchLine(line + kPrefetchAhead);
        const __m256i v = Load32(line + 32 * h);
        const __m256i lo = _mm256_and_si256(v, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        for (int t = 0; t < T; ++t) {
          alo[t] = _mm256_add_epi16(alo[t], _mm256_maddubs_epi16(lo, Bcast(a[t].qs + 64 * c + 4 * k)));
          ahi[t] = _mm256_add_epi16(ahi[t], _mm256_maddubs_epi16(hi, Bcast(a[t].qs + 64 * c + 32 + 4 * k)));
        }
      }
      for (int t = 0; t < T; ++t) isum[t] = Q4_KScaled(isum[t], alo[t], ahi[t], s.sc[2 * c], s.sc[2 * c + 1]);
    }
    for (int t = 0; t < T; ++t) acc[t] = _mm256_add_ps(acc[t], Q4_KTerm(s, a[t], isum[t]));
  }
  for (int t = 0; t < T; ++t) StoreRows(y + t * ldy, acc[t], valid);
}

constexpr int kTokensQ4_K = 4;

// One token (decode): both halves of a group in one pass (each line read once, each activation dword
// broadcast once for the 16 rows); per row the operations of TileQ4_K<1>.
inline void TileQ4_KOne(const uint8_t* group, int64_t nb, const ActQ8_K* act, float* y, int valid0,
                        int valid1) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* sb = group + b * kQ4_KPackBytes;
    Q4_KScales s[2];
    UnpackScales(sb, 0, &s[0]);
    UnpackScales(sb, 1, &s[1]);
    const ActQ8_K& a = act[b];
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int c = 0; c < 4; ++c) {
      __m256i alo[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      __m256i ahi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      for (int k = 0; k < 8; ++k) {
        const uint8_t* line = sb + kQ4_KPackQs + c * 512 + k * 64;
        PrefetchLine(line + kPrefetchAhead);
        const __m256i xl = Bcast(a.qs + 64 * c + 4 * k), xh = Bcast(a.qs + 64 * c + 32 + 4 * k);
        for (int h = 0; h < 2; ++h) {
          const __m256i v = Load32(line + 32 * h);
          alo[h] = _mm256_add_epi16(alo[h], _mm256_maddubs_epi16(_mm256_and_si256(v, low4), xl));
          ahi[h] = _mm256_add_epi16(
              ahi[h], _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), xh));
        }
      }
      for (int h = 0; h < 2; ++h)
        isum[h] = Q4_KScaled(isum[h], alo[h], ahi[h], s[h].sc[2 * c], s[h].sc[2 * c + 1]);
    }
    for (int h = 0; h < 2; ++h) acc[h] = _mm256_add_ps(acc[h], Q4_KTerm(s[h], a, isum[h]));
  }
  StoreRows(y, acc[0], valid0);
  if (valid1 > 0) StoreRows(y + 8, acc[1], valid1);
}

template <int T>
inline void TileQ4_KTail(int count, const uint8_t* group, int h, int64_t nb, const ActQ8_K* act,
                         int64_t n_tokens, float* y, int64_t ldy, int valid, bool prefetch) {
  if constexpr (T > 0) {
    if (count == T) return TileQ4_K<T>(group, h, nb, act, n_tokens, y, ldy, valid, prefetch);
    TileQ4_KTail<T - 1>(count, group, h, nb, act, n_tokens, y, ldy, valid, prefetch);
  }
}

void PackedQ4_K(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = n / 256;
  const size_t group_bytes = PackedGroupBytes(GgmlType::kQ4_K, n);
  const auto* a = reinterpret_cast<const ActQ8_K*>(act);
  for (int64_t r = r0; r < r1; r += kPackRows) {
    const uint8_t* group = w + (r / kPackRows) * group_bytes;
    if (n_tokens == 1) {
      TileQ4_KOne(group, nb, a, y + r, HalfRows(r, r1, 0), HalfRows(r, r1, 1));
      continue;
    }
    for (int h = 0; h < 2; ++h) {
      const int valid = HalfRows(r, r1, h);
      if (valid == 0) break;
      int64_t t = 0;
      for (; t + kTokensQ4_K <= n_tokens; t += kTokensQ4_K) {
        TileQ4_K<kTokensQ4_K>(group, h, nb, a + t, n_tokens, y + t * ldy + r + 8 * h, ldy, valid, t == 0);
      }
      if (t < n_tokens) {
        TileQ4_KTail<kTokensQ4_K - 1>(static_cast<int>(n_tokens - t), group, h, nb, a + t, n_tokens,
                                      y + t * ldy + r + 8 * h, ldy, valid, t == 0);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// q6_k: S = sum_j sc_j * sum q * a - 32 * sum_j sc_j * bsum_j, exact in int32, as the AVX-512 kernel.

struct Q6_KScales {
  __m256i sc[16];
  __m256i scpair[8];
  __m256 d;
};

inline void UnpackScalesQ6_K(const uint8_t* sb, int h, Q6_KScales* s) {
  for (int w = 0; w < 4; ++w) {
    const __m256i v = Load32(sb + kQ6_KPackScales + w * 64 + 32 * h);
    for (int e = 0; e < 4; ++e) {
      s->sc[4 * w + e] = _mm256_srai_epi32(_mm256_shuffle_epi8(v, DwordBytes(-1, -1, -1, e)), 24);
    }
    s->scpair[2 * w] = _mm256_srai_epi16(_mm256_shuffle_epi8(v, DwordBytes(-1, 0, -1, 1)), 8);
    s->scpair[2 * w + 1] = _mm256_srai_epi16(_mm256_shuffle_epi8(v, DwordBytes(-1, 2, -1, 3)), 8);
  }
  s->d = Halves(sb + kQ6_KPackD + 16 * h);
}

// The 4 vectors of 6-bit values one step of a super-block yields from its lines f1, f2 and nbl: the low 6
// bits of f1 and f2, then a nibble of nbl under the top 2 bits of f1 and of f2.
inline void Q6Values(__m256i f1, __m256i f2, __m256i nbl, __m256i q[4]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), low6 = _mm256_set1_epi8(0x3F), bits45 = _mm256_set1_epi8(0x30);
  q[0] = _mm256_and_si256(f1, low6);
  q[1] = _mm256_and_si256(f2, low6);
  q[2] = _mm256_or_si256(_mm256_and_si256(nbl, low4), _mm256_and_si256(_mm256_srli_epi16(f1, 2), bits45));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(nbl, 4), low4),
                         _mm256_and_si256(_mm256_srli_epi16(f2, 2), bits45));
}

// A super-block's term for 8 rows and one token: the integer sum less 32 x the scaled activation sums,
// times the scales.
inline __m256 Q6_KTerm(const Q6_KScales& s, const BlockQ8_K& a, __m256i isum) {
  __m256i corr = _mm256_setzero_si256();
  for (int k = 0; k < 8; ++k)
    corr = _mm256_add_epi32(corr, _mm256_madd_epi16(s.scpair[k], Bcast(a.bsums + 2 * k)));
  const __m256i total = _mm256_sub_epi32(isum, _mm256_slli_epi32(corr, 5));
  const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(a.d), s.d);
  return _mm256_mul_ps(dd, _mm256_cvtepi32_ps(total));
}

template <int T>
inline void TileQ6_K(const uint8_t* group, int h, int64_t nb, const BlockQ8_K* act, int64_t n_tokens,
                     float* y, int64_t ldy, int valid, bool prefetch) {
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* sb = group + b * kQ6_KPackBytes;
    Q6_KScales s;
    UnpackScalesQ6_K(sb, h, &s);
    const BlockQ8_K* a = act + b * n_tokens;
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    // Step p yields groups p, 16 + p (the low 6 bits of f1, f2) and 32 + p, 48 + p (a nibble of nb
    // under the top 2 bits of f1, f2): sub-blocks p / 4 + 0, 4, 8, 12.
    for (int jj = 0; jj < 4; ++jj) {
      __m256i part[4][T];
      for (int i = 0; i < 4; ++i) {
        for (int t = 0; t < T; ++t) part[i][t] = _mm256_setzero_si256();
      }
      for (int g = 0; g < 4; ++g) {
        const int p = 4 * jj + g;
        const uint8_t* set = sb + kQ6_KPackQuants + p * 192;
        if (prefetch && h == 0) {
          PrefetchLine(set + kPrefetchAhead);
          PrefetchLine(set + 64 + kPrefetchAhead);
          PrefetchLine(set + 128 + kPrefetchAhead);
        }
        const __m256i f1 = Load32(set + 32 * h), f2 = Load32(set + 64 + 32 * h);
        const __m256i nbl = Load32(set + 128 + 32 * h);
        __m256i q[4];
        Q6Values(f1, f2, nbl, q);
        for (int i = 0; i < 4; ++i) {
          for (int t = 0; t < T; ++t) {
            part[i][t] = _mm256_add_epi32(part[i][t], Dot4(q[i], Bcast(a[t].qs + 4 * (16 * i + p))));
          }
        }
      }
      for (int i = 0; i < 4; ++i) {
        for (int t = 0; t < T; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(part[i][t], s.sc[4 * i + jj]));
        }
      }
    }
    for (int t = 0; t < T; ++t) acc[t] = _mm256_add_ps(acc[t], Q6_KTerm(s, a[t], isum[t]));
  }
  for (int t = 0; t < T; ++t) StoreRows(y + t * ldy, acc[t], valid);
}

constexpr int kTokensQ6_K = 4;

// One token (decode): both halves of a group in one pass; per row the operations of TileQ6_K<1>.
inline void TileQ6_KOne(const uint8_t* group, int64_t nb, const BlockQ8_K* act, float* y, int valid0,
                        int valid1) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* sb = group + b * kQ6_KPackBytes;
    Q6_KScales s[2];
    UnpackScalesQ6_K(sb, 0, &s[0]);
    UnpackScalesQ6_K(sb, 1, &s[1]);
    const BlockQ8_K& a = act[b];
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int jj = 0; jj < 4; ++jj) {
      __m256i part[2][4];
      for (int h = 0; h < 2; ++h) {
        for (int i = 0; i < 4; ++i) part[h][i] = _mm256_setzero_si256();
      }
      for (int g = 0; g < 4; ++g) {
        const int p = 4 * jj + g;
        const uint8_t* set = sb + kQ6_KPackQuants + p * 192;
        PrefetchLine(set + kPrefetchAhead);
        PrefetchLine(set + 64 + kPrefetchAhead);
        PrefetchLine(set + 128 + kPrefetchAhead);
        __m256i x[4];
        for (int i = 0; i < 4; ++i) x[i] = Bcast(a.qs + 4 * (16 * i + p));
        for (int h = 0; h < 2; ++h) {
          const __m256i f1 = Load32(set + 32 * h), f2 = Load32(set + 64 + 32 * h);
          const __m256i nbl = Load32(set + 128 + 32 * h);
          __m256i q[4];
          Q6Values(f1, f2, nbl, q);
          for (int i = 0; i < 4; ++i) part[h][i] = _mm256_add_epi32(part[h][i], Dot4(q[i], x[i]));
        }
      }
      for (int h = 0; h < 2; ++h) {
        for (int i = 0; i < 4; ++i) {
          isum[h] = _mm256_add_epi32(isum[h], _mm256_mullo_epi32(part[h][i], s[h].sc[4 * i + jj]));
        }
      }
    }
    for (int h = 0; h < 2; ++h) acc[h] = _mm256_add_ps(acc[h], Q6_KTerm(s[h], a, isum[h]));
  }
  StoreRows(y, acc[0], valid0);
  if (valid1 > 0) StoreRows(y + 8, acc[1], valid1);
}

template <int T>
inline void TileQ6_KTail(int count, const uint8_t* group, int h, int64_t nb, const BlockQ8_K* act,
                         int64_t n_tokens, float* y, int64_t ldy, int valid, bool prefetch) {
  if constexpr (T > 0) {
    if (count == T) return TileQ6_K<T>(group, h, nb, act, n_tokens, y, ldy, valid, prefetch);
    TileQ6_KTail<T - 1>(count, group, h, nb, act, n_tokens, y, ldy, valid, prefetch);
  }
}

void PackedQ6_K(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = n / 256;
  const size_t group_bytes = PackedGroupBytes(GgmlType::kQ6_K, n);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act);
  for (int64_t r = r0; r < r1; r += kPackRows) {
    const uint8_t* group = w + (r / kPackRows) * group_bytes;
    if (n_tokens == 1) {
      TileQ6_KOne(group, nb, a, y + r, HalfRows(r, r1, 0), HalfRows(r, r1, 1));
      continue;
    }
    for (int h = 0; h < 2; ++h) {
      const int valid = HalfRows(r, r1, h);
      if (valid == 0) break;
      int64_t t = 0;
      for (; t + kTokensQ6_K <= n_tokens; t += kTokensQ6_K) {
        TileQ6_K<kTokensQ6_K>(group, h, nb, a + t, n_tokens, y + t * ldy + r + 8 * h, ldy, valid, t == 0);
      }
      if (t < n_tokens) {
        TileQ6_KTail<kTokensQ6_K - 1>(static_cast<int>(n_tokens - t), group, h, nb, a + t, n_tokens,
                                      y + t * ldy + r + 8 * h, ldy, valid, t == 0);
      }
    }
  }
}

}  // namespace

void FillAvx2Packed(KernelTable* t) {
  t->packed[Slot(GgmlType::kQ8_0)] = PackedQ8_0;
  t->packed[Slot(GgmlType::kQ4_K)] = PackedQ4_K;
  t->packed[Slot(GgmlType::kQ6_K)] = PackedQ6_K;
  // Measured faster than the GGUF-layout AVX2 kernels (docs/bench/cpu-kernels.md), so AVX2 machines
  // pack too.
  t->packed_native[Slot(GgmlType::kQ8_0)] = true;
  t->packed_native[Slot(GgmlType::kQ4_K)] = true;
  t->packed_native[Slot(GgmlType::kQ6_K)] = true;
}

}  // namespace fak::cpu
