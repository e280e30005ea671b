#include "backends/cuda/weights.h"

#include <cstring>

#include "quant/codec.h"  // DequantizeRow
#include "quant/q4_k.h"   // BlockQ4_K
#include "quant/q6_k.h"   // BlockQ6_K
#include "quant/q8_0.h"   // BlockQ8_0

namespace fak::cuda {
namespace {

constexpr size_t kQ6Body = 208;  // ql[128], qh[64], scales[16]
static_assert(sizeof(BlockQ6_K) == kQ6Body + 2);

}  // namespace

Result<HostMatrix> RepackForDevice(const Weight& w) {
  if (!w.present()) return InvalidArgument("binding an absent matrix");
  if (w.packed) return InvalidArgument("the CUDA backend takes GGUF rows, not the CPU's packed layout");
  const int64_t rows = w.rows, cols = w.cols;
  HostMatrix m;
  const auto rows_u = static_cast<size_t>(rows);
  switch (w.type) {
    case GgmlType::kQ8_0: {
      m.format = MatFormat::kQ8_0;
      const int64_t nb = cols / 32;
      m.q.resize(rows_u * static_cast<size_t>(cols));
      m.d.resize(rows_u * static_cast<size_t>(nb));
      for (int64_t r = 0; r < rows; ++r) {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(w.row(r));
        for (int64_t k = 0; k < nb; ++k) {
          BlockQ8_0 blk;
          std::memcpy(&blk, b + k, sizeof(blk));  // rows of an unpadded file may sit at odd addresses
          m.d[static_cast<size_t>(r * nb + k)] = blk.d;
          std::memcpy(&m.q[static_cast<size_t>(r * cols + k * 32)], blk.qs, 32);
        }
      }
      return m;
    }
    case GgmlType::kQ4_K: {
      m.format = MatFormat::kQ4_K;
      m.q.resize(rows_u * w.row_bytes);
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(&m.q[static_cast<size_t>(r) * w.row_bytes], w.row(r), w.row_bytes);
      return m;
    }
    case GgmlType::kQ6_K: {
      m.format = MatFormat::kQ6_K;
      const int64_t nb = cols / 256;
      m.q.resize(rows_u * static_cast<size_t>(nb) * kQ6Body);
      m.d.resize(rows_u * static_cast<size_t>(nb));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t k = 0; k < nb; ++k) {
          BlockQ6_K blk;
          std::memcpy(&blk, w.row(r) + k * sizeof(BlockQ6_K), sizeof(blk));
          uint8_t* dst = &m.q[static_cast<size_t>(r * nb + k) * kQ6Body];
          std::memcpy(dst, blk.ql, sizeof(blk.ql));
          std::memcpy(dst + sizeof(blk.ql), blk.qh, sizeof(blk.qh));
          std::memcpy(dst + sizeof(blk.ql) + sizeof(blk.qh), blk.scales, sizeof(blk.scales));
          m.d[static_cast<size_t>(r * nb + k)] = blk.d;
        }
      }
      return m;
    }
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kF32: {
      const int64_t per_chunk = w.type == GgmlType::kF32 ? 4 : 8;  // one 16-byte load
      if (cols % per_chunk != 0) {
        return Unsupported(
            "the CUDA backend reads {} rows in 16-byte chunks: {} columns is not a multiple of {}",
            GgmlTypeName(w.type), cols, per_chunk);
      }
      m.format = w.type == GgmlType::kF16    ? MatFormat::kF16
                 : w.type == GgmlType::kBF16 ? MatFormat::kBF16
                                             : MatFormat::kF32;
      m.q.resize(rows_u * w.row_bytes);
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(&m.q[static_cast<size_t>(r) * w.row_bytes], w.row(r), w.row_bytes);
      return m;
    }
    default:
      return Unsupported(
          "the CUDA backend has no kernel for {} weights (it reads q8_0, q4_k, q6_k, f16, bf16, f32)",
          GgmlTypeName(w.type));
  }
}

Result<std::vector<float>> DequantizeDeviceLayout(const HostMatrix& m, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    float* y = &out[static_cast<size_t>(r * cols)];
    switch (m.format) {
      case MatFormat::kQ8_0: {
        std::vector<BlockQ8_0> blocks(static_cast<size_t>(cols / 32));
        for (size_t k = 0; k < blocks.size(); ++k) {
          blocks[k].d = m.d[static_cast<size_t>(r) * blocks.size() + k];
          std::memcpy(blocks[k].qs, &m.q[static_cast<size_t>(r * cols) + k * 32], 32);
        }
        FAK_RETURN_IF_ERROR(DequantizeRow(GgmlType::kQ8_0, blocks.data(), y, cols));
        break;
      }
      case MatFormat::kQ4_K:
        FAK_RETURN_IF_ERROR(
            DequantizeRow(GgmlType::kQ4_K, &m.q[static_cast<size_t>(r * (cols / 256)) * 144], y, cols));
        break;
      case MatFormat::kQ6_K: {
        std::vector<BlockQ6_K> blocks(static_cast<size_t>(cols / 256));
        for (size_t k = 0; k < blocks.size(); ++k) {
          const uint8_t* src = &m.q[(static_cast<size_t>(r) * blocks.size() + k) * kQ6Body];
          std::memcpy(blocks[k].ql, src, sizeof(blocks[k].ql));
          std::memcpy(blocks[k].qh, src + sizeof(blocks[k].ql), sizeof(blocks[k].qh));
          std::memcpy(blocks[k].scales, src + sizeof(blocks[k].ql) + sizeof(blocks[k].qh),
                      sizeof(blocks[k].scales));
          blocks[k].d = m.d[static_cast<size_t>(r) * blocks.size() + k];
        }
        FAK_RETURN_IF_ERROR(DequantizeRow(GgmlType::kQ6_K, blocks.data(), y, cols));
        break;
      }
      case MatFormat::kF16:
        FAK_RETURN_IF_ERROR(DequantizeRow(GgmlType::kF16, &m.q[static_cast<size_t>(r * cols) * 2], y, cols));
        break;
      case MatFormat::kBF16:
        FAK_RETURN_IF_ERROR(DequantizeRow(GgmlType::kBF16, &m.q[static_cast<size_t>(r * cols) * 2], y, cols));
        break;
      case MatFormat::kF32:
        std::memcpy(y, &m.q[static_cast<size_t>(r * cols) * 4], static_cast<size_t>(cols) * 4);
        break;
    }
  }
  return out;
}

}  // namespace fak::cuda
