// AVX-512 VNNI kernels over the packed layout (backends/cpu/packed.h). One zmm lane per weight row:
// vpdpbusd adds 4 u8 weight bytes x 4 s8 activation bytes into each row's int32 lane, the activation
// dword broadcast to all 16 rows ({1to16}), so a block's exact integer sum for 16 rows takes 8
// instructions and no horizontal reduction; the float steps then follow the reference per lane.
//
// Napkin math (one core of this Zen 5 machine, ~1 zmm vpdpbusd per cycle): q8_0 spends per (16 rows, block,
// token) 8 vpdpbusd + cvt + 2 mul + add, so at best ~80% of the int8 peak; decode streams 544 bytes per (16
// rows, block) in ~15 instructions, far below what memory delivers, so it is bandwidth-bound.
//
// Internal linkage only and no standard-library templates (see x86_ymm_body.h for why).
//
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized inside _mm512_set1_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/isa_tables.h"
#include "backends/cpu/packed.h"
#include "quant/q8_k.h"  // BlockQ8_K

#ifndef FAK_PF_DIST
#define FAK_PF_DIST 13824
#endif
namespace fak::cpu {
namespace {

inline int32_t LoadI32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline __m512i Bcast(const void* p) { return _mm512_set1_epi32(LoadI32(p)); }

// acc + the u8 x s8 dot of w with the 4 bytes at p in every lane: vpdpbusd with the activation dword as
// an embedded broadcast ({1to16}), one fused load-and-multiply where the intrinsics (GCC 12) emit a
// separate vpbroadcastd for each.
inline __m512i DotBcast(__m512i acc, __m512i w, const void* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*static_cast<const int32_t*>(p)));
  return acc;
}

// Software prefetch, one line for each line about to be read, kPrefetchAhead bytes ahead: the first
// token tile of a group streams it from memory, and the k-quant kernels do enough work per cache
// line that the hardware prefetchers alone fall behind (one thread: q4_k 21.7 GB/s without it, 38-41
// with it 3-4 super-blocks ahead; q6_k 24.8 -> 35; q8_0 decode reads at the memory's rate either way,
// its batched tiles gain). Later tiles of the group find it in cache and skip it.
constexpr int kPrefetchAhead = 9216;
inline void PrefetchLine(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

inline void StoreRows(float* y, __m512 v, __mmask16 mask) { _mm512_mask_storeu_ps(y, mask, v); }

// ---------------------------------------------------------------------------------------------------
// q8_0. Blocks come in pairs, [quants 2 x 512 B][scales 2 x 32 B]; ForEachBlockQ8_0 walks a group's
// blocks in order and hands each one's quants and scales to `body`.
template <typename Body>
inline void ForEachBlockQ8_0(const uint8_t* group, int64_t nb, Body&& body) {
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2, group += 1088) {
    body(b, group, group + 1024);
    body(b + 1, group + 512, group + 1056);
  }
  if (b < nb) body(b, group, group + 512);
}

// Tile of 16 rows x T tokens; weights (8 zmm) and scales loaded once per block for all T tokens.
template <int T>
inline void TileQ8_0(const uint8_t* group, int64_t nb, const ActQ8_0* act, int64_t n_tokens, float* y,
                     int64_t ldy, __mmask16 mask, bool prefetch) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  ForEachBlockQ8_0(group, nb, [&](int64_t b, const uint8_t* quants, const uint8_t* scales) {
    if (prefetch) {
      for (int l = 0; l < 8; ++l) PrefetchLine(quants + l * 64 + kPrefetchAhead);
      if ((b & 1) == 0) PrefetchLine(scales + kPrefetchAhead);
    }
    const __m512i* wq = reinterpret_cast<const __m512i*>(quants);
    const __m512i w0 = _mm512_loadu_si512(wq + 0), w1 = _mm512_loadu_si512(wq + 1);
    const __m512i w2 = _mm512_loadu_si512(wq + 2), w3 = _mm512_loadu_si512(wq + 3);
    const __m512i w4 = _mm512_loadu_si512(wq + 4), w5 = _mm512_loadu_si512(wq + 5);
    const __m512i w6 = _mm512_loadu_si512(wq + 6), w7 = _mm512_loadu_si512(wq + 7);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
    const ActQ8_0* a = act + b * n_tokens;
    for (int t = 0; t < T; ++t) {
      const int8_t* q = a[t].qs;
      __m512i s = _mm512_set1_epi32(a[t].corr);
      s = _mm512_dpbusd_epi32(s, w0, Bcast(q + 0));
      s = _mm512_dpbusd_epi32(s, w1, Bcast(q + 4));
      s = _mm512_dpbusd_epi32(s, w2, Bcast(q + 8));
      s = _mm512_dpbusd_epi32(s, w3, Bcast(q + 12));
      s = _mm512_dpbusd_epi32(s, w4, Bcast(q + 16));
      s = _mm512_dpbusd_epi32(s, w5, Bcast(q + 20));
      s = _mm512_dpbusd_epi32(s, w6, Bcast(q + 24));
      s = _mm512_dpbusd_epi32(s, w7, Bcast(q + 28));
      const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(a[t].d));
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(sc, _mm512_cvtepi32_ps(s)));
    }
  });
  for (int t = 0; t < T; ++t) StoreRows(y + t * ldy, acc[t], mask);
}

// Decode: one token. The block's 8 products run as two chains so consecutive blocks overlap. (Walking
// 2 or 4 groups side by side, more streams in flight, measured slower.)
inline __m512 BlockQ8_0Vec(__m512 acc, const uint8_t* quants, const uint8_t* scales, const ActQ8_0& ab) {
  const __m512i* wq = reinterpret_cast<const __m512i*>(quants);
  const int8_t* q = ab.qs;
  __m512i s0 = _mm512_set1_epi32(ab.corr), s1 = _mm512_setzero_si512();
  s0 = _mm512_dpbusd_epi32(s0, _mm512_loadu_si512(wq + 0), Bcast(q + 0));
  s1 = _mm512_dpbusd_epi32(s1, _mm512_loadu_si512(wq + 1), Bcast(q + 4));
  s0 = _mm512_dpbusd_epi32(s0, _mm512_loadu_si512(wq + 2), Bcast(q + 8));
  s1 = _mm512_dpbusd_epi32(s1, _mm512_loadu_si512(wq + 3), Bcast(q + 12));
  s0 = _mm512_dpbusd_epi32(s0, _mm512_loadu_si512(wq + 4), Bcast(q + 16));
  s1 = _mm512_dpbusd_epi32(s1, _mm512_loadu_si512(wq + 5), Bcast(q + 20));
  s0 = _mm512_dpbusd_epi32(s0, _mm512_loadu_si512(wq + 6), Bcast(q + 24));
  s1 = _mm512_dpbusd_epi32(s1, _mm512_loadu_si512(wq + 7), Bcast(q + 28));
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
  const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(ab.d));
  return _mm512_add_ps(acc, _mm512_mul_ps(sc, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1))));
}

inline void VecQ8_0(const uint8_t* group, int64_t nb, const ActQ8_0* a, float* y, __mmask16 mask) {
  __m512 acc = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2, group += 1088) {
    acc = BlockQ8_0Vec(acc, group, group + 1024, a[b]);
    acc = BlockQ8_0Vec(acc, group + 512, group + 1056, a[b + 1]);
  }
  if (b < nb) acc = BlockQ8_0Vec(acc, group, group + 512, a[b]);
  StoreRows(y, acc, mask);
}

constexpr int kTokensQ8_0 = 8;

template <int T>
inline void TileQ8_0Tail(int count, const uint8_t* group, int64_t nb, const ActQ8_0* act, int64_t n_tokens,
                         float* y, int64_t ldy, __mmask16 mask, bool prefetch) {
  if constexpr (T > 0) {
    if (count == T) return TileQ8_0<T>(group, nb, act, n_tokens, y, ldy, mask, prefetch);
    TileQ8_0Tail<T - 1>(count, group, nb, act, n_tokens, y, ldy, mask, prefetch);
  }
}

void PackedQ8_0(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = n / 32;
  const size_t group_bytes = PackedGroupBytes(GgmlType::kQ8_0, n);
  const auto* a = reinterpret_cast<const ActQ8_0*>(act);
  for (int64_t r = r0; r < r1; r += kPackRows) {
    const uint8_t* group = w + (r / kPackRows) * group_bytes;
    const int64_t valid = r1 - r < kPackRows ? r1 - r : kPackRows;
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    if (n_tokens == 1) {
      VecQ8_0(group, nb, a, y + r, mask);
      continue;
    }
    int64_t t = 0;
    for (; t + kTokensQ8_0 <= n_tokens; t += kTokensQ8_0) {
      TileQ8_0<kTokensQ8_0>(group, nb, a + t, n_tokens, y + t * ldy + r, ldy, mask, t == 0);
    }
    if (t < n_tokens) {
      TileQ8_0Tail<kTokensQ8_0 - 1>(static_cast<int>(n_tokens - t), group, nb, a + t, n_tokens,
                                    y + t * ldy + r, ldy, mask, t == 0);
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// q4_k. Per (16 rows, super-block) the 6-bit scales and minimums are unpacked once into int32 lanes
// (sc_j) and int16 pairs (m_2k, m_2k+1); the quants' low and high nibbles feed vpdpbusd directly
// (0..15 as u8). S = sum_j sc_j * isum_j (vpmulld), M = sum_j m_j * bsum_j (vpdpwssd), exact in int32.

struct Q4_KScales {
  __m512i sc[8];     // sc_j per lane
  __m512i mpair[4];  // int16 (m_2k, m_2k+1) per lane
  __m512 d, dmin;
};

// A vpshufb control that builds each dword from bytes (b0, b1, b2, b3) of the same dword; -1 gives 0.
constexpr uint32_t Sel(int d, int b) { return b < 0 ? 0x80u : static_cast<uint32_t>(4 * d + b); }
constexpr int32_t Ctl(int d, int b0, int b1, int b2, int b3) {
  return static_cast<int32_t>(Sel(d, b0) | Sel(d, b1) << 8 | Sel(d, b2) << 16 | Sel(d, b3) << 24);
}
inline __m512i DwordBytes(int b0, int b1, int b2, int b3) {
  const __m128i lane = _mm_setr_epi32(Ctl(0, b0, b1, b2, b3), Ctl(1, b0, b1, b2, b3), Ctl(2, b0, b1, b2, b3),
                                      Ctl(3, b0, b1, b2, b3));
  return _mm512_broadcast_i32x4(lane);
}

inline void UnpackScales(const uint8_t* sb, Q4_KScales* s) {
  const __m512i s0 = _mm512_loadu_si512(sb + kQ4_KPackScales),
                s1 = _mm512_loadu_si512(sb + kQ4_KPackScales + 64);
  const __m512i s2 = _mm512_loadu_si512(sb + kQ4_KPackScales + 128);
  const __m512i m3f = _mm512_set1_epi32(0x3F3F3F3F), m0f = _mm512_set1_epi32(0x0F0F0F0F);
  const __m512i m30 = _mm512_set1_epi32(0x30303030);
  const __m512i sc_lo = _mm512_and_si512(s0, m3f);
  const __m512i m_lo = _mm512_and_si512(s1, m3f);
  const __m512i sc_hi =
      _mm512_or_si512(_mm512_and_si512(s2, m0f), _mm512_and_si512(_mm512_srli_epi32(s0, 2), m30));
  const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(s2, 4), m0f),
                                       _mm512_and_si512(_mm512_srli_epi32(s1, 2), m30));
  // Byte j of each lane's dword -> int32 lane; bytes (2k, 2k+1) -> int16 pair.
  for (int j = 0; j < 4; ++j) {
    const __m512i pick = DwordBytes(j, -1, -1, -1);
    s->sc[j] = _mm512_shuffle_epi8(sc_lo, pick);
    s->sc[j + 4] = _mm512_shuffle_epi8(sc_hi, pick);
  }
  const __m512i pair0 = DwordBytes(0, -1, 1, -1), pair1 = DwordBytes(2, -1, 3, -1);
  s->mpair[0] = _mm512_shuffle_epi8(m_lo, pair0);
  s->mpair[1] = _mm512_shuffle_epi8(m_lo, pair1);
  s->mpair[2] = _mm512_shuffle_epi8(m_hi, pair0);
  s->mpair[3] = _mm512_shuffle_epi8(m_hi, pair1);
  s->d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + kQ4_KPackD)));
  s->dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + kQ4_KPackDmin)));
}

// Wide tiles: the low and then the high nibbles of each 512-byte run, T tokens each (the second pass
// finds the run in L1), so the unpacking is shared by T tokens with 3 T accumulators live (acc, isum and
// one run's sums) instead of 4 T.
template <int T>
inline void SuperBlockQ4_KWide(const uint8_t* sb, const Q4_KScales& s, const ActQ8_K* a, bool prefetch,
                               __m512i isum[T]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int c = 0; c < 4; ++c) {
    for (int h = 0; h < 2; ++h) {
      __m512i part[T];
      for (int t = 0; t < T; ++t) part[t] = _mm512_setzero_si512();
      for (int k = 0; k < 8; ++k) {
        const uint8_t* line = sb + kQ4_KPackQs + c * 512 + k * 64;
        if (prefetch && h == 0) PrefetchLine(line + kPrefetchAhead);
        const __m512i v = _mm512_loadu_si512(line);
        const __m512i q =
            h == 0 ? _mm512_and_si512(v, low4) : _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        for (int t = 0; t < T; ++t) part[t] = DotBcast(part[t], q, a[t].qs + 64 * c + 32 * h + 4 * k);
      }
      for (int t = 0; t < T; ++t)
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(part[t], s.sc[2 * c + h]));
    }
  }
}

constexpr int kWideQ4_K = 5;  // tiles of this many tokens or more take SuperBlockQ4_KWide

// 16 rows x T tokens over all super-blocks.
template <int T>
inline void TileQ4_K(const uint8_t* group, int64_t nb, const ActQ8_K* act, int64_t n_tokens, float* y,
                     int64_t ldy, __mmask16 mask, bool prefetch) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* sb = group + b * kQ4_KPackBytes;
    Q4_KScales s;
    UnpackScales(sb, &s);
    const ActQ8_K* a = act + b * n_tokens;
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    if constexpr (T >= kWideQ4_K) {
      SuperBlockQ4_KWide<T>(sb, s, a, prefetch, isum);
    } else {
      for (int c = 0; c < 4; ++c) {
        __m512i alo[T], ahi[T];
        for (int t = 0; t < T; ++t) alo[t] = ahi[t] = _mm512_setzero_si512();
        for (int k = 0; k < 8; ++k) {
          if (prefetch) PrefetchLine(sb + kQ4_KPackQs + c * 512 + k * 64 + kPrefetchAhead);
          const __m512i v = _mm512_loadu_si512(sb + kQ4_KPackQs + c * 512 + k * 64);
          const __m512i lo = _mm512_and_si512(v, low4);
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
          for (int t = 0; t < T; ++t) {
            if constexpr (T > 1) {
              alo[t] = DotBcast(alo[t], lo, a[t].qs + 64 * c + 4 * k);
              ahi[t] = DotBcast(ahi[t], hi, a[t].qs + 64 * c + 32 + 4 * k);
            } else {  // decode: the separate broadcasts measured 3% faster
              alo[t] = _mm512_dpbusd_epi32(alo[t], lo, Bcast(a[t].qs + 64 * c + 4 * k));
              ahi[t] = _mm512_dpbusd_epi32(ahi[t], hi, Bcast(a[t].qs + 64 * c + 32 + 4 * k));
            }
          }
        }
        for (int t = 0; t < T; ++t) {
          isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(alo[t], s.sc[2 * c]),
                                                               _mm512_mullo_epi32(ahi[t], s.sc[2 * c + 1])));
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const int16_t* bs = a[t].bsum32;
      __m512i ms = _mm512_dpwssd_epi32(_mm512_setzero_si512(), s.mpair[0], Bcast(bs + 0));
      ms = _mm512_dpwssd_epi32(ms, s.mpair[1], Bcast(bs + 2));
      ms = _mm512_dpwssd_epi32(ms, s.mpair[2], Bcast(bs + 4));
      ms = _mm512_dpwssd_epi32(ms, s.mpair[3], Bcast(bs + 6));
      const __m512 ad = _mm512_set1_ps(a[t].d);
      const __m512 dd = _mm512_mul_ps(ad, s.d), dm = _mm512_mul_ps(ad, s.dmin);
      const __m512 part = _mm512_sub_ps(_mm512_mul_ps(dd, _mm512_cvtepi32_ps(isum[t])),
                                        _mm512_mul_ps(dm, _mm512_cvtepi32_ps(ms)));
      acc[t] = _mm512_add_ps(acc[t], part);
    }
  }
  for (int t = 0; t < T; ++t) StoreRows(y + t * ldy, acc[t], mask);
}

// 6 tokens in the two-pass loop: 1536x8960 and 8960x1536 x 256 tokens on 2 threads here 10.3-11.0 ms
// against 11.4-12.2 for 4 tokens in one pass; 8 tokens 10.7-11.3.
constexpr int kTokensQ4_K = 6;

template <int T>
inline void TileQ4_KTail(int count, const uint8_t* group, int64_t nb, const ActQ8_K* act, int64_t n_tokens,
                         float* y, int64_t ldy, __mmask16 mask, bool prefetch) {
  if constexpr (T > 0) {
    if (count == T) return TileQ4_K<T>(group, nb, act, n_tokens, y, ldy, mask, prefetch);
    TileQ4_KTail<T - 1>(count, group, nb, act, n_tokens, y, ldy, mask, prefetch);
  }
}

void PackedQ4_K(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = n / 256;
  const size_t group_bytes = PackedGroupBytes(GgmlType::kQ4_K, n);
  const auto* a = reinterpret_cast<const ActQ8_K*>(act);
  for (int64_t r = r0; r < r1; r += kPackRows) {
    const uint8_t* group = w + (r / kPackRows) * group_bytes;
    const int64_t valid = r1 - r < kPackRows ? r1 - r : kPackRows;
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    int64_t t = 0;
    for (; t + kTokensQ4_K <= n_tokens; t += kTokensQ4_K) {
      TileQ4_K<kTokensQ4_K>(group, nb, a + t, n_tokens, y + t * ldy + r, ldy, mask, t == 0);
    }
    if (t < n_tokens) {
      TileQ4_KTail<kTokensQ4_K - 1>(static_cast<int>(n_tokens - t), group, nb, a + t, n_tokens,
                                    y + t * ldy + r, ldy, mask, t == 0);
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// q6_k. S = sum_j sc_j * sum q*a - 32 * sum_j sc_j * bsum_j, exact in int32; about 2.25 unpacking
// operations per unpacked vector, shared by the tile's tokens.

struct Q6_KScales {
  __m512i sc[16];     // signed sc_j per lane
  __m512i scpair[8];  // int16 (sc_2k, sc_2k+1) per lane
  __m512 d;
};

inline void UnpackScalesQ6_K(const uint8_t* sb, Q6_KScales* s) {
  for (int w = 0; w < 4; ++w) {
    const __m512i v = _mm512_loadu_si512(sb + kQ6_KPackScales + w * 64);
    for (int e = 0; e < 4; ++e) {
      s->sc[4 * w + e] = _mm512_srai_epi32(_mm512_shuffle_epi8(v, DwordBytes(-1, -1, -1, e)), 24);
    }
    s->scpair[2 * w] = _mm512_srai_epi16(_mm512_shuffle_epi8(v, DwordBytes(-1, 0, -1, 1)), 8);
    s->scpair[2 * w + 1] = _mm512_srai_epi16(_mm512_shuffle_epi8(v, DwordBytes(-1, 2, -1, 3)), 8);
  }
  s->d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + kQ6_KPackD)));
}

// All 16 sub-blocks of a super-block for T tokens into isum. Step p yields groups p, 16 + p (the low
// 6 bits of f1, f2) and 32 + p, 48 + p (a nibble of nb under the top 2 bits of f1, f2), which belong to
// sub-blocks p / 4 + 0, 4, 8, 12.
template <int T, bool Prefetch>
inline void SuperBlockQ6_K(const uint8_t* sb, const Q6_KScales& s, const BlockQ8_K* a, __m512i isum[T]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), low6 = _mm512_set1_epi8(0x3F), bits45 = _mm512_set1_epi8(0x30);
  for (int jj = 0; jj < 4; ++jj) {
    __m512i acc[4][T];
    for (int i = 0; i < 4; ++i) {
      for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_si512();
    }
    for (int g = 0; g < 4; ++g) {
      const int p = 4 * jj + g;
      const uint8_t* set = sb + kQ6_KPackQuants + p * 192;
      if constexpr (Prefetch) {
        PrefetchLine(set + kPrefetchAhead);
        PrefetchLine(set + 64 + kPrefetchAhead);
        PrefetchLine(set + 128 + kPrefetchAhead);
      }
      const __m512i f1 = _mm512_loadu_si512(set), f2 = _mm512_loadu_si512(set + 64);
      const __m512i nb = _mm512_loadu_si512(set + 128);
      // lo | (hi & 0x30) in one vpternlogd
      const __m512i q[4] = {
          _mm512_and_si512(f1, low6), _mm512_and_si512(f2, low6),
          _mm512_ternarylogic_epi32(_mm512_and_si512(nb, low4), _mm512_srli_epi16(f1, 2), bits45, 0xF8),
          _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(nb, 4), low4),
                                    _mm512_srli_epi16(f2, 2), bits45, 0xF8)};
      for (int i = 0; i < 4; ++i) {
        for (int t = 0; t < T; ++t) {
          acc[i][t] = DotBcast(acc[i][t], q[i], a[t].qs + 4 * (16 * i + p));
        }
      }
    }
    for (int i = 0; i < 4; ++i) {
      for (int t = 0; t < T; ++t) {
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(acc[i][t], s.sc[4 * i + jj]));
      }
    }
  }
}

// The same sums for a wide tile of T tokens, sub-block group by sub-block group: pass i unpacks only
// the groups 16 i + p (one or two of the three loads of each step, found in L1 after the first pass)
// and feeds T tokens from each, so the unpacking (about 2.25 operations per unpacked vector) is shared
// by twice as many vpdpbusd as in SuperBlockQ6_K's T = 4, with T + T accumulators live instead of 4 T.
// The int32 sums are exact, so their order does not change the result.
constexpr int kWideQ6_K = 5;  // tiles of this many tokens or more take SuperBlockQ6_KWide

template <int T, bool Prefetch>
inline void SuperBlockQ6_KWide(const uint8_t* sb, const Q6_KScales& s, const BlockQ8_K* a, __m512i isum[T]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), low6 = _mm512_set1_epi8(0x3F), bits45 = _mm512_set1_epi8(0x30);
  for (int i = 0; i < 4; ++i) {
    for (int jj = 0; jj < 4; ++jj) {
      __m512i acc[T];
      for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_si512();
      for (int g = 0; g < 4; ++g) {
        const int p = 4 * jj + g;
        const uint8_t* set = sb + kQ6_KPackQuants + p * 192;
        if constexpr (Prefetch) {
          if (i == 0) {
            PrefetchLine(set + kPrefetchAhead);
            PrefetchLine(set + 64 + kPrefetchAhead);
            PrefetchLine(set + 128 + kPrefetchAhead);
          }
        }
        __m512i q;
        if (i == 0) {
          q = _mm512_and_si512(_mm512_loadu_si512(set), low6);
        } else if (i == 1) {
          q = _mm512_and_si512(_mm512_loadu_si512(set + 64), low6);
        } else if (i == 2) {
          q = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_loadu_si512(set + 128), low4),
                                        _mm512_srli_epi16(_mm512_loadu_si512(set), 2), bits45, 0xF8);
        } else {
          q = _mm512_ternarylogic_epi32(
              _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(set + 128), 4), low4),
              _mm512_srli_epi16(_mm512_loadu_si512(set + 64), 2), bits45, 0xF8);
        }
        for (int t = 0; t < T; ++t) acc[t] = DotBcast(acc[t], q, a[t].qs + 4 * (16 * i + p));
      }
      for (int t = 0; t < T; ++t)
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(acc[t], s.sc[4 * i + jj]));
    }
  }
}

template <int T>
inline void TileQ6_K(const uint8_t* group, int64_t nb, const BlockQ8_K* act, int64_t n_tokens, float* y,
                     int64_t ldy, __mmask16 mask, bool prefetch) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* sb = group + b * kQ6_KPackBytes;
    // Prefetching the whole next super-block here (53 loads at once) was slower than none (22.5 GB/s
    // against 28.8 on one thread); one line per line read, 3-4 super-blocks ahead, reaches 35.
    Q6_KScales s;
    UnpackScalesQ6_K(sb, &s);
    const BlockQ8_K* a = act + b * n_tokens;
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    // A compile-time choice: the test inside the loop alone slowed prefill by a third.
    if constexpr (T >= kWideQ6_K) {
      if (prefetch) {
        SuperBlockQ6_KWide<T, true>(sb, s, a, isum);
      } else {
        SuperBlockQ6_KWide<T, false>(sb, s, a, isum);
      }
    } else if (prefetch) {
      SuperBlockQ6_K<T, true>(sb, s, a, isum);
    } else {
      SuperBlockQ6_K<T, false>(sb, s, a, isum);
    }
    for (int t = 0; t < T; ++t) {
      __m512i corr = _mm512_setzero_si512();
      for (int k = 0; k < 8; ++k) corr = _mm512_dpwssd_epi32(corr, s.scpair[k], Bcast(a[t].bsums + 2 * k));
      const __m512i total = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(corr, 5));
      const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(a[t].d), s.d);
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(total)));
    }
  }
  for (int t = 0; t < T; ++t) StoreRows(y + t * ldy, acc[t], mask);
}

// 8 tokens through SuperBlockQ6_KWide: 1536x8960 x 256 tokens on 2 threads here 12.7-13.7 ms against
// 16.1-17.4 for 4 tokens through SuperBlockQ6_K (where 3, 5 and 6 had measured slower than 4); 6 and
// 12 tokens 12.6-13.8 and 13.4-13.5.
constexpr int kTokensQ6_K = 8;

template <int T>
inline void TileQ6_KTail(int count, const uint8_t* group, int64_t nb, const BlockQ8_K* act, int64_t n_tokens,
                         float* y, int64_t ldy, __mmask16 mask, bool prefetch) {
  if constexpr (T > 0) {
    if (count == T) return TileQ6_K<T>(group, nb, act, n_tokens, y, ldy, mask, prefetch);
    TileQ6_KTail<T - 1>(count, group, nb, act, n_tokens, y, ldy, mask, prefetch);
  }
}

void PackedQ6_K(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = n / 256;
  const size_t group_bytes = PackedGroupBytes(GgmlType::kQ6_K, n);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act);
  for (int64_t r = r0; r < r1; r += kPackRows) {
    const uint8_t* group = w + (r / kPackRows) * group_bytes;
    const int64_t valid = r1 - r < kPackRows ? r1 - r : kPackRows;
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    int64_t t = 0;
    for (; t + kTokensQ6_K <= n_tokens; t += kTokensQ6_K) {
      TileQ6_K<kTokensQ6_K>(group, nb, a + t, n_tokens, y + t * ldy + r, ldy, mask, t == 0);
    }
    if (t < n_tokens) {
      TileQ6_KTail<kTokensQ6_K - 1>(static_cast<int>(n_tokens - t), group, nb, a + t, n_tokens,
                                    y + t * ldy + r, ldy, mask, t == 0);
    }
  }
}

}  // namespace

void FillAvx512Packed(KernelTable* t) {
  t->packed[Slot(GgmlType::kQ8_0)] = PackedQ8_0;
  t->packed[Slot(GgmlType::kQ4_K)] = PackedQ4_K;
  t->packed_native[Slot(GgmlType::kQ8_0)] = true;
  t->packed_native[Slot(GgmlType::kQ4_K)] = true;
  t->packed[Slot(GgmlType::kQ6_K)] = PackedQ6_K;
  t->packed_native[Slot(GgmlType::kQ6_K)] = true;
}

}  // namespace fak::cpu
