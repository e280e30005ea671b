#include "backends/cpu/packed.h"

#include <cstring>
#include <optional>

#include "quant/f16.h"   // Fp16ToFp32
#include "quant/q4_k.h"  // BlockQ4_K
#include "quant/q6_k.h"  // BlockQ6_K, UnpackQ6_K
#include "quant/q8_0.h"  // BlockQ8_0, QuantizeRowQ8_0
#include "quant/q8_k.h"  // BlockQ8_K, QuantizeRowQ8_K

namespace fak::cpu {
namespace {

// Bytes of one GGUF row of a packable type; 0 when cols is not a whole number of its blocks.
size_t RowBytes(GgmlType type, int64_t cols) {
  if (!HasPackedLayout(type) || cols <= 0) return 0;
  const std::optional<uint64_t> bytes = GgmlRowBytes(type, static_cast<uint64_t>(cols));
  return bytes ? static_cast<size_t>(*bytes) : 0;
}

// One group of 16 rows; rows past `valid` are zero.
void PackGroupQ8_0(const BlockQ8_0* const rows[kPackRows], int valid, int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* quants = out + PackedQ8_0QuantOffset(b);      // (8, 16, 4) u8
    uint8_t* scales = out + PackedQ8_0ScaleOffset(nb, b);  // (16) f16
    // A dword at a time: MatMul also packs GGUF rows on the fly for prefill.
    for (int r = 0; r < kPackRows; ++r) {
      const BlockQ8_0* blk = r < valid ? &rows[r][b] : nullptr;
      const uint16_t d = blk != nullptr ? blk->d : 0;
      std::memcpy(scales + 2 * r, &d, 2);
      for (int k = 0; k < 8; ++k) {
        uint32_t q = 0;
        if (blk != nullptr) std::memcpy(&q, blk->qs + 4 * k, 4);
        q ^= 0x80808080u;  // q + 128 in every byte
        std::memcpy(quants + k * 64 + r * 4, &q, 4);
      }
    }
  }
}

void PackGroupQ4_K(const BlockQ4_K* const rows[kPackRows], int valid, int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* sb = out + b * kQ4_KPackBytes;
    for (int r = 0; r < kPackRows; ++r) {
      BlockQ4_K zero{};
      const BlockQ4_K& blk = r < valid ? rows[r][b] : zero;
      for (int c = 0; c < 4; ++c) {
        for (int k = 0; k < 8; ++k)
          std::memcpy(sb + kQ4_KPackQs + c * 512 + k * 64 + r * 4, blk.qs + 32 * c + 4 * k, 4);
      }
      std::memcpy(sb + kQ4_KPackD + 2 * r, &blk.d, 2);
      std::memcpy(sb + kQ4_KPackDmin + 2 * r, &blk.dmin, 2);
      for (int w = 0; w < 3; ++w) std::memcpy(sb + kQ4_KPackScales + w * 64 + r * 4, blk.scales + 4 * w, 4);
    }
  }
}

void PackGroupQ6_K(const BlockQ6_K* const rows[kPackRows], int valid, int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* sb = out + b * kQ6_KPackBytes;
    for (int r = 0; r < kPackRows; ++r) {
      BlockQ6_K zero{};
      const BlockQ6_K& blk = r < valid ? rows[r][b] : zero;
      uint8_t q[kQK_K];
      UnpackQ6_K(blk, q);
      for (int p = 0; p < 16; ++p) {
        uint8_t* set = sb + kQ6_KPackQuants + p * 192 + r * 4;
        for (int e = 0; e < 4; ++e) {
          const int i = 4 * p + e;
          set[e] = static_cast<uint8_t>(q[i] | (q[128 + i] >> 4) << 6);
          set[64 + e] = static_cast<uint8_t>(q[64 + i] | (q[192 + i] >> 4) << 6);
          set[128 + e] = static_cast<uint8_t>((q[128 + i] & 15) | (q[192 + i] & 15) << 4);
        }
      }
      for (int w = 0; w < 4; ++w) std::memcpy(sb + kQ6_KPackScales + w * 64 + r * 4, blk.scales + 4 * w, 4);
      std::memcpy(sb + kQ6_KPackD + 2 * r, &blk.d, 2);
    }
  }
}

}  // namespace

size_t PackedQ8_0QuantOffset(int64_t b) { return static_cast<size_t>(b / 2 * 1088 + (b & 1) * 512); }
size_t PackedQ8_0ScaleOffset(int64_t nb, int64_t b) {
  return static_cast<size_t>(b / 2 * 1088 + ((b | 1) < nb ? 1024 : 512) + (b & 1) * 32);
}

bool HasPackedLayout(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_K || type == GgmlType::kQ6_K;
}

size_t PackedGroupBytes(GgmlType type, int64_t cols) {
  const size_t row_bytes = RowBytes(type, cols);
  return (row_bytes * kPackRows + 63) / 64 * 64;
}

size_t PackedBytes(GgmlType type, int64_t rows, int64_t cols) {
  if (rows <= 0) return 0;
  const size_t groups = static_cast<size_t>((rows + kPackRows - 1) / kPackRows);
  return groups * PackedGroupBytes(type, cols);
}

Status PackMatrix(GgmlType type, const void* gguf_rows, int64_t rows, int64_t cols, void* out) {
  if (!HasPackedLayout(type)) {
    return Unsupported("pack: no packed layout for weights of type {}", GgmlTypeName(type));
  }
  if (rows <= 0 || cols <= 0) return InvalidArgument("pack: matrix shape ({}, {}) is empty", rows, cols);
  const size_t row_bytes = RowBytes(type, cols);
  if (row_bytes == 0) {
    return InvalidArgument("pack: {} rows of {} elements are not a whole number of blocks",
                           GgmlTypeName(type), cols);
  }
  if (gguf_rows == nullptr || out == nullptr) return InvalidArgument("pack: null buffer");
  const auto* src = static_cast<const uint8_t*>(gguf_rows);
  auto* dst = static_cast<uint8_t*>(out);
  const size_t group_bytes = PackedGroupBytes(type, cols);
  for (int64_t g = 0; g * kPackRows < rows; ++g) {
    const int valid = static_cast<int>(rows - g * kPackRows < kPackRows ? rows - g * kPackRows : kPackRows);
    uint8_t* group = dst + g * group_bytes;
    std::memset(group + row_bytes * kPackRows, 0, group_bytes - row_bytes * kPackRows);
    if (type == GgmlType::kQ8_0) {
      const BlockQ8_0* r[kPackRows];
      for (int i = 0; i < valid; ++i)
        r[i] = reinterpret_cast<const BlockQ8_0*>(src + (g * kPackRows + i) * row_bytes);
      PackGroupQ8_0(r, valid, cols / kQK8_0, group);
    } else if (type == GgmlType::kQ4_K) {
      const BlockQ4_K* r[kPackRows];
      for (int i = 0; i < valid; ++i)
        r[i] = reinterpret_cast<const BlockQ4_K*>(src + (g * kPackRows + i) * row_bytes);
      PackGroupQ4_K(r, valid, cols / kQK_K, group);
    } else {
      const BlockQ6_K* r[kPackRows];
      for (int i = 0; i < valid; ++i)
        r[i] = reinterpret_cast<const BlockQ6_K*>(src + (g * kPackRows + i) * row_bytes);
      PackGroupQ6_K(r, valid, cols / kQK_K, group);
    }
  }
  return Status::Ok();
}

bool PreferPackedLayout(GgmlType type) {
  return HasPackedLayout(type) && Kernels().packed_native[KernelSlot(type)];
}

size_t PackedActivationBytes(GgmlType type, int64_t n, int64_t n_tokens) {
  if (type == GgmlType::kQ8_0) return static_cast<size_t>(n / kQK8_0 * n_tokens) * sizeof(ActQ8_0);
  if (type == GgmlType::kQ4_K) return static_cast<size_t>(n / kQK_K * n_tokens) * sizeof(ActQ8_K);
  if (type == GgmlType::kQ6_K) return static_cast<size_t>(n / kQK_K * n_tokens) * sizeof(BlockQ8_K);
  return 0;
}

namespace {

void ToActQ8_0(const BlockQ8_0& blk, ActQ8_0* o) {
  int32_t sum = 0;
  for (int i = 0; i < kQK8_0; ++i) sum += blk.qs[i];
  std::memcpy(o->qs, blk.qs, sizeof(o->qs));
  o->d = Fp16ToFp32(blk.d);
  o->corr = -128 * sum;
}

void ToActQ8_K(const BlockQ8_K& blk, ActQ8_K* o) {
  std::memcpy(o->qs, blk.qs, sizeof(o->qs));
  for (int j = 0; j < 8; ++j) o->bsum32[j] = static_cast<int16_t>(blk.bsums[2 * j] + blk.bsums[2 * j + 1]);
  o->d = blk.d;
  o->pad[0] = o->pad[1] = o->pad[2] = 0;
}

}  // namespace

void QuantizePackedActivations(GgmlType type, const float* x, int64_t n, int64_t t, int64_t n_tokens,
                               void* out) {
  if (type == GgmlType::kQ8_0) {
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
      BlockQ8_0 blk;
      QuantizeRowQ8_0(x + b * kQK8_0, &blk, kQK8_0);
      ToActQ8_0(blk, static_cast<ActQ8_0*>(out) + b * n_tokens + t);
    }
  } else if (type == GgmlType::kQ4_K) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      BlockQ8_K blk;
      QuantizeRowQ8_K(x + b * kQK_K, &blk, kQK_K);
      ToActQ8_K(blk, static_cast<ActQ8_K*>(out) + b * n_tokens + t);
    }
  } else if (type == GgmlType::kQ6_K) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
      QuantizeRowQ8_K(x + b * kQK_K, static_cast<BlockQ8_K*>(out) + b * n_tokens + t, kQK_K);
    }
  }
}

void PackActivations(GgmlType type, const uint8_t* rows, size_t stride, int64_t n, int64_t n_tokens,
                     void* out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const uint8_t* row = rows + t * stride;
    if (type == GgmlType::kQ8_0) {
      for (int64_t b = 0; b < n / kQK8_0; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, row + b * sizeof(BlockQ8_0), sizeof(blk));
        ToActQ8_0(blk, static_cast<ActQ8_0*>(out) + b * n_tokens + t);
      }
    } else if (type == GgmlType::kQ4_K) {
      for (int64_t b = 0; b < n / kQK_K; ++b) {
        BlockQ8_K blk;
        std::memcpy(&blk, row + b * sizeof(BlockQ8_K), sizeof(blk));
        ToActQ8_K(blk, static_cast<ActQ8_K*>(out) + b * n_tokens + t);
      }
    } else if (type == GgmlType::kQ6_K) {
      for (int64_t b = 0; b < n / kQK_K; ++b) {
        std::memcpy(static_cast<BlockQ8_K*>(out) + b * n_tokens + t, row + b * sizeof(BlockQ8_K),
                    sizeof(BlockQ8_K));
      }
    }
  }
}

}  // namespace fak::cpu
