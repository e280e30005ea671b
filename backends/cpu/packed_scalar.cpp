// Plain C++ kernels over the packed layout: the fallback for levels without their own, and a readable
// statement of the layout. Each row follows the quant/ reference's order of float operations.
#include <cstring>

#include "backends/cpu/isa_tables.h"
#include "backends/cpu/packed.h"
#include "quant/f16.h"   // Fp16ToFp32
#include "quant/q4_k.h"  // Q4_KScaleMin
#include "quant/q8_k.h"  // BlockQ8_K

namespace fak::cpu {
namespace {

void PackedQ8_0(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = n / 32;
  const size_t group_bytes = PackedGroupBytes(GgmlType::kQ8_0, n);
  const auto* a = reinterpret_cast<const ActQ8_0*>(act);  // (nb, n_tokens)
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* quants = w + (r / kPackRows) * group_bytes;
    const int lane = static_cast<int>(r % kPackRows);
    for (int64_t t = 0; t < n_tokens; ++t) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const ActQ8_0& ab = a[b * n_tokens + t];
        int32_t isum = ab.corr;  // sum (q + 128) * a - 128 * sum a = sum q * a
        for (int k = 0; k < 8; ++k) {
          const uint8_t* u = quants + PackedQ8_0QuantOffset(b) + k * 64 + lane * 4;
          for (int j = 0; j < 4; ++j) isum += static_cast<int32_t>(u[j]) * ab.qs[4 * k + j];
        }
        uint16_t d;
        std::memcpy(&d, quants + PackedQ8_0ScaleOffset(nb, b) + lane * 2, 2);
        const float s = Fp16ToFp32(d) * ab.d;
        acc = acc + s * static_cast<float>(isum);
      }
      y[t * ldy + r] = acc;
    }
  }
}

void PackedQ4_K(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = n / 256;
  const size_t group_bytes = PackedGroupBytes(GgmlType::kQ4_K, n);
  const auto* a = reinterpret_cast<const ActQ8_K*>(act);  // (nb, n_tokens)
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* group = w + (r / kPackRows) * group_bytes;
    const int lane = static_cast<int>(r % kPackRows);
    for (int64_t t = 0; t < n_tokens; ++t) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* sb = group + b * kQ4_KPackBytes;
        const ActQ8_K& ab = a[b * n_tokens + t];
        uint8_t scales[12];
        for (int word = 0; word < 3; ++word)
          std::memcpy(scales + 4 * word, sb + kQ4_KPackScales + word * 64 + lane * 4, 4);
        int32_t s = 0, ms = 0;
        for (int j = 0; j < 8; ++j) {
          uint8_t sc, m;
          Q4_KScaleMin(j, scales, &sc, &m);
          const int c = j / 2, shift = (j & 1) * 4;
          int32_t isum = 0;
          for (int i = 0; i < 32; ++i) {
            const uint8_t byte = sb[kQ4_KPackQs + c * 512 + (i / 4) * 64 + lane * 4 + i % 4];
            isum += ((byte >> shift) & 0xF) * static_cast<int32_t>(ab.qs[32 * j + i]);
          }
          s += sc * isum;
          ms += m * ab.bsum32[j];
        }
        uint16_t d, dmin;
        std::memcpy(&d, sb + kQ4_KPackD + 2 * lane, 2);
        std::memcpy(&dmin, sb + kQ4_KPackDmin + 2 * lane, 2);
        const float dd = ab.d * Fp16ToFp32(d);
        const float dm = ab.d * Fp16ToFp32(dmin);
        acc = acc + (dd * static_cast<float>(s) - dm * static_cast<float>(ms));
      }
      y[t * ldy + r] = acc;
    }
  }
}

void PackedQ6_K(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = n / 256;
  const size_t group_bytes = PackedGroupBytes(GgmlType::kQ6_K, n);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act);  // (nb, n_tokens)
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* group = w + (r / kPackRows) * group_bytes;
    const int lane = static_cast<int>(r % kPackRows);
    for (int64_t t = 0; t < n_tokens; ++t) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* sb = group + b * kQ6_KPackBytes;
        const BlockQ8_K& ab = a[b * n_tokens + t];
        int32_t s = 0;
        for (int j = 0; j < 16; ++j) {
          const int8_t sc = static_cast<int8_t>(sb[kQ6_KPackScales + (j / 4) * 64 + lane * 4 + j % 4]);
          int32_t isum = 0;
          for (int i = 16 * j; i < 16 * j + 16; ++i) {
            const int k = i / 4, e = i % 4, p = k % 16;
            const uint8_t* set = sb + kQ6_KPackQuants + p * 192 + lane * 4 + e;
            const uint8_t f1 = set[0], f2 = set[64], nib = set[128];
            int q;
            switch (k / 16) {
              case 0: q = f1 & 63; break;
              case 1: q = f2 & 63; break;
              case 2: q = (nib & 15) | (f1 >> 6) << 4; break;
              default: q = (nib >> 4) | (f2 >> 6) << 4; break;
            }
            isum += (q - 32) * ab.qs[i];
          }
          s += sc * isum;
        }
        uint16_t d;
        std::memcpy(&d, sb + kQ6_KPackD + 2 * lane, 2);
        const float dd = ab.d * Fp16ToFp32(d);
        acc = acc + dd * static_cast<float>(s);
      }
      y[t * ldy + r] = acc;
    }
  }
}

template <GgmlType kType>
void QuantizePacked(const float* x, int64_t n, int64_t t, int64_t n_tokens, void* out) {
  QuantizePackedActivations(kType, x, n, t, n_tokens, out);
}

}  // namespace

void FillScalarPacked(KernelTable* t) {
  t->quantize_packed[Slot(GgmlType::kQ8_0)] = QuantizePacked<GgmlType::kQ8_0>;
  t->quantize_packed[Slot(GgmlType::kQ4_K)] = QuantizePacked<GgmlType::kQ4_K>;
  t->quantize_packed[Slot(GgmlType::kQ6_K)] = QuantizePacked<GgmlType::kQ6_K>;
  t->packed[Slot(GgmlType::kQ8_0)] = PackedQ8_0;
  t->packed[Slot(GgmlType::kQ4_K)] = PackedQ4_K;
  t->packed[Slot(GgmlType::kQ6_K)] = PackedQ6_K;
  for (bool& native : t->packed_native) native = false;
}

}  // namespace fak::cpu
