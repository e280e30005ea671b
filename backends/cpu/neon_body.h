// NEON (armv8.2-a + dotprod) kernel bodies shared by the matvec and matmul translation units, which
// fill their entries with FillNeon. One weight row is dotted with T tokens at a time, so each weight
// block is loaded (and, for k-quants, unpacked) once per T tokens. Exact integer sums per block, then
// the reference's float sequence.
//
// A row kernel is a struct template Row<T> deriving from RowBlocks; Row<T>::Run(w, a, nb, out) dots one
// weight row of nb blocks with T tokens' activation rows a[T].
//
// Internal linkage only and no standard-library templates: see x86_ymm_body.h.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/isa_tables.h"  // SetEntry
#include "quant/ggml_type.h"          // GgmlType
#include "quant/q4_k.h"               // BlockQ4_K
#include "quant/q6_k.h"               // BlockQ6_K
#include "quant/q8_0.h"               // BlockQ8_0
#include "quant/q8_k.h"               // BlockQ8_K

namespace fak::cpu {
namespace {

inline float HalfToFloat(uint16_t h) {
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

// What RunTiles casts a row kernel's bytes to: its weight and activation blocks, and elements per block.
template <typename Weight, typename Act, int64_t kElems>
struct RowBlocks {
  using WeightBlock = Weight;
  using ActBlock = Act;
  static constexpr int64_t kBlockElems = kElems;
};

template <int T>
struct RowQ8_0 : RowBlocks<BlockQ8_0, BlockQ8_0, kQK8_0> {
  static void Run(const BlockQ8_0* w, const BlockQ8_0* const a[T], int64_t nb, float out[T]) {
    float acc[T];
    for (int t = 0; t < T; ++t) acc[t] = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      const int8x16_t w0 = vld1q_s8(w[b].qs), w1 = vld1q_s8(w[b].qs + 16);
      const float dw = HalfToFloat(w[b].d);
      for (int t = 0; t < T; ++t) {
        int32x4_t p = vdotq_s32(vdupq_n_s32(0), w0, vld1q_s8(a[t][b].qs));
        p = vdotq_s32(p, w1, vld1q_s8(a[t][b].qs + 16));
        const float s = dw * HalfToFloat(a[t][b].d);
        acc[t] = acc[t] + s * static_cast<float>(vaddvq_s32(p));
      }
    }
    for (int t = 0; t < T; ++t) out[t] = acc[t];
  }
};

template <int T>
struct RowQ4_K : RowBlocks<BlockQ4_K, BlockQ8_K, kQK_K> {
  static void Run(const BlockQ4_K* w, const BlockQ8_K* const a[T], int64_t nb, float out[T]) {
    float acc[T];
    for (int t = 0; t < T; ++t) acc[t] = 0.0f;
    const uint8x16_t mask = vdupq_n_u8(0x0F);
    for (int64_t b = 0; b < nb; ++b) {
      uint32_t u[3];
      std::memcpy(u, w[b].scales, 12);
      uint8_t sc[8], m[8];
      const uint32_t sc_lo = u[0] & 0x3F3F3F3Fu, m_lo = u[1] & 0x3F3F3F3Fu;
      const uint32_t sc_hi = (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4);
      const uint32_t m_hi = ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4);
      std::memcpy(sc, &sc_lo, 4), std::memcpy(sc + 4, &sc_hi, 4);
      std::memcpy(m, &m_lo, 4), std::memcpy(m + 4, &m_hi, 4);
      int8x16_t q[16];  // sub-block j: q[2j], q[2j + 1]
      for (int c = 0; c < 4; ++c) {
        const uint8x16_t r0 = vld1q_u8(w[b].qs + 32 * c), r1 = vld1q_u8(w[b].qs + 32 * c + 16);
        q[4 * c + 0] = vreinterpretq_s8_u8(vandq_u8(r0, mask));
        q[4 * c + 1] = vreinterpretq_s8_u8(vandq_u8(r1, mask));
        q[4 * c + 2] = vreinterpretq_s8_u8(vshrq_n_u8(r0, 4));
        q[4 * c + 3] = vreinterpretq_s8_u8(vshrq_n_u8(r1, 4));
      }
      const float d = HalfToFloat(w[b].d), dmin = HalfToFloat(w[b].dmin);
      for (int t = 0; t < T; ++t) {
        const BlockQ8_K& x = a[t][b];
        int32_t s = 0, ms = 0;
        for (int j = 0; j < 8; ++j) {
          int32x4_t p = vdotq_s32(vdupq_n_s32(0), q[2 * j], vld1q_s8(x.qs + 32 * j));
          p = vdotq_s32(p, q[2 * j + 1], vld1q_s8(x.qs + 32 * j + 16));
          s += sc[j] * vaddvq_s32(p);
          ms += m[j] * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
        }
        const float dd = x.d * d, dm = x.d * dmin;
        acc[t] = acc[t] + (dd * static_cast<float>(s) - dm * static_cast<float>(ms));
      }
    }
    for (int t = 0; t < T; ++t) out[t] = acc[t];
  }
};

template <int T>
struct RowQ6_K : RowBlocks<BlockQ6_K, BlockQ8_K, kQK_K> {
  static void Run(const BlockQ6_K* w, const BlockQ8_K* const a[T], int64_t nb, float out[T]) {
    float acc[T];
    for (int t = 0; t < T; ++t) acc[t] = 0.0f;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m2 = vdupq_n_u8(0x03);
    for (int64_t b = 0; b < nb; ++b) {
      int8x16_t q[16];  // 16 quants each, in element order, minus 32
      for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 2; ++k) {
          const uint8x16_t ql0 = vld1q_u8(w[b].ql + 64 * h + 16 * k);
          const uint8x16_t ql1 = vld1q_u8(w[b].ql + 64 * h + 32 + 16 * k);
          const uint8x16_t qh = vld1q_u8(w[b].qh + 32 * h + 16 * k);
          const uint8x16_t e0 = vorrq_u8(vandq_u8(ql0, m4), vshlq_n_u8(vandq_u8(qh, m2), 4));
          const uint8x16_t e1 = vorrq_u8(vandq_u8(ql1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 2), m2), 4));
          const uint8x16_t e2 = vorrq_u8(vshrq_n_u8(ql0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 4), m2), 4));
          const uint8x16_t e3 = vorrq_u8(vshrq_n_u8(ql1, 4), vshlq_n_u8(vshrq_n_u8(qh, 6), 4));
          const int8x16_t off = vdupq_n_s8(32);
          q[8 * h + 0 + k] = vsubq_s8(vreinterpretq_s8_u8(e0), off);
          q[8 * h + 2 + k] = vsubq_s8(vreinterpretq_s8_u8(e1), off);
          q[8 * h + 4 + k] = vsubq_s8(vreinterpretq_s8_u8(e2), off);
          q[8 * h + 6 + k] = vsubq_s8(vreinterpretq_s8_u8(e3), off);
        }
      }
      const float d = HalfToFloat(w[b].d);
      for (int t = 0; t < T; ++t) {
        const BlockQ8_K& x = a[t][b];
        int32_t s = 0;
        for (int j = 0; j < 16; ++j) {
          s += w[b].scales[j] * vaddvq_s32(vdotq_s32(vdupq_n_s32(0), q[j], vld1q_s8(x.qs + 16 * j)));
        }
        acc[t] = acc[t] + (x.d * d) * static_cast<float>(s);
      }
    }
    for (int t = 0; t < T; ++t) out[t] = acc[t];
  }
};

inline float32x4_t LoadF16x4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
inline float32x4_t LoadBf16x4(const uint16_t* p) {
  return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

// f16 / bf16 weights: 16 float lanes, lane = element index mod 16, then the ReduceLanes16 tree; a
// "block" is one element, so rows of any length work.
template <bool kBf16, int T>
struct RowHalf : RowBlocks<uint16_t, float, 1> {
  static void Run(const uint16_t* w, const float* const x[T], int64_t n, float out[T]) {
    float32x4_t l[T][4];
    for (int t = 0; t < T; ++t) {
      for (int k = 0; k < 4; ++k) l[t][k] = vdupq_n_f32(0.0f);
    }
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      float32x4_t wv[4];
      for (int k = 0; k < 4; ++k) wv[k] = kBf16 ? LoadBf16x4(w + i + 4 * k) : LoadF16x4(w + i + 4 * k);
      for (int t = 0; t < T; ++t) {
        for (int k = 0; k < 4; ++k) {
          l[t][k] = vaddq_f32(l[t][k], vmulq_f32(wv[k], vld1q_f32(x[t] + i + 4 * k)));
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      float lane[16];
      for (int k = 0; k < 4; ++k) vst1q_f32(lane + 4 * k, l[t][k]);
      for (int64_t k = i; k < n; ++k) {
        float wk;
        if (kBf16) {
          const uint32_t bits = static_cast<uint32_t>(w[k]) << 16;
          std::memcpy(&wk, &bits, 4);
        } else {
          wk = HalfToFloat(w[k]);
        }
        const float p = wk * x[t][k];
        lane[k & 15] = lane[k & 15] + p;
      }
      float a8[8], b4[4], c2[2];
      for (int k = 0; k < 8; ++k) a8[k] = lane[k] + lane[k + 8];
      for (int k = 0; k < 4; ++k) b4[k] = a8[k] + a8[k + 4];
      for (int k = 0; k < 2; ++k) c2[k] = b4[k] + b4[k + 2];
      out[t] = c2[0] + c2[1];
    }
  }
};
template <int T>
using RowF16 = RowHalf<false, T>;
template <int T>
using RowBf16 = RowHalf<true, T>;

// Rows [r0, r1) x tokens [0, n_tokens) in tiles of 1 row x 4 tokens.
template <template <int> class Row>
void RunTiles(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, size_t act_stride,
              int64_t n_tokens, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  using WeightBlock = typename Row<1>::WeightBlock;
  using ActBlock = typename Row<1>::ActBlock;
  const int64_t nb = n / Row<1>::kBlockElems;
  for (int64_t r = r0; r < r1; ++r) {
    const WeightBlock* row = reinterpret_cast<const WeightBlock*>(w + r * row_bytes);
    int64_t t = 0;
    for (; t + 4 <= n_tokens; t += 4) {
      const ActBlock* a[4];
      for (int k = 0; k < 4; ++k) a[k] = reinterpret_cast<const ActBlock*>(act + (t + k) * act_stride);
      float out[4];
      Row<4>::Run(row, a, nb, out);
      for (int k = 0; k < 4; ++k) y[(t + k) * ldy + r] = out[k];
    }
    for (; t < n_tokens; ++t) {
      const ActBlock* a[1] = {reinterpret_cast<const ActBlock*>(act + t * act_stride)};
      float out[1];
      Row<1>::Run(row, a, nb, out);
      y[t * ldy + r] = out[0];
    }
  }
}

// The entries of the NEON table: its matvec ones (kMatVec) or its matmul ones. f32 weights keep the
// scalar reference's kernels.
template <bool kMatVec>
inline void FillNeon(KernelTable* t) {
  SetEntry<kMatVec, GgmlType::kF16, RunTiles<RowF16>>(t);
  SetEntry<kMatVec, GgmlType::kBF16, RunTiles<RowBf16>>(t);
  SetEntry<kMatVec, GgmlType::kQ8_0, RunTiles<RowQ8_0>>(t);
  SetEntry<kMatVec, GgmlType::kQ4_K, RunTiles<RowQ4_K>>(t);
  SetEntry<kMatVec, GgmlType::kQ6_K, RunTiles<RowQ6_K>>(t);
}

}  // namespace
}  // namespace fak::cpu
