#include "quant/codec.h"

#include <cstring>

#include "quant/f16.h"
#include "quant/legacy.h"
#include "quant/q4_k.h"
#include "quant/q6_k.h"
#include "quant/q8_0.h"
#include "quant/q8_k.h"

namespace fak {
namespace {

Status CheckLength(GgmlType type, int64_t n) {
  if (n < 0) return InvalidArgument("{}: negative element count {}", GgmlTypeName(type), n);
  auto traits = GetGgmlTypeTraits(type);
  if (!traits) return Unsupported("ggml type id {} is unknown", static_cast<uint32_t>(type));
  if (n % traits->block_size != 0) {
    return InvalidArgument("{}: {} elements is not a whole number of {}-element blocks", traits->name, n,
                           traits->block_size);
  }
  return Status::Ok();
}

bool Supported(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
    case GgmlType::kQ8_K: return true;
    default: return false;
  }
}

// Formats read but never written (llama.cpp's older 32-element blocks).
bool ReadOnly(GgmlType type) {
  return type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 || type == GgmlType::kQ5_0 ||
         type == GgmlType::kQ5_1;
}

}  // namespace

bool CanDequantize(GgmlType type) { return Supported(type) || ReadOnly(type); }
bool CanQuantize(GgmlType type) { return Supported(type); }

Status DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  if (!CanDequantize(type)) return Unsupported("dequantize: no codec for {}", GgmlTypeName(type));
  FAK_RETURN_IF_ERROR(CheckLength(type, n));
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (type) {
    case GgmlType::kQ4_0: DequantizeRowQ4_0(bytes, dst, n); break;
    case GgmlType::kQ4_1: DequantizeRowQ4_1(bytes, dst, n); break;
    case GgmlType::kQ5_0: DequantizeRowQ5_0(bytes, dst, n); break;
    case GgmlType::kQ5_1: DequantizeRowQ5_1(bytes, dst, n); break;
    case GgmlType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case GgmlType::kF16: DequantizeRowF16(static_cast<const uint16_t*>(src), dst, n); break;
    case GgmlType::kBF16: DequantizeRowBf16(static_cast<const uint16_t*>(src), dst, n); break;
    case GgmlType::kQ8_0: DequantizeRowQ8_0(static_cast<const BlockQ8_0*>(src), dst, n); break;
    case GgmlType::kQ4_K: DequantizeRowQ4_K(static_cast<const BlockQ4_K*>(src), dst, n); break;
    case GgmlType::kQ6_K: DequantizeRowQ6_K(static_cast<const BlockQ6_K*>(src), dst, n); break;
    case GgmlType::kQ8_K: DequantizeRowQ8_K(static_cast<const BlockQ8_K*>(src), dst, n); break;
    default: return Internal("dequantize: unhandled {}", GgmlTypeName(type));
  }
  return Status::Ok();
}

Status QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n) {
  if (!Supported(type)) return Unsupported("quantize: no codec for {}", GgmlTypeName(type));
  FAK_RETURN_IF_ERROR(CheckLength(type, n));
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case GgmlType::kF16: QuantizeRowF16(src, static_cast<uint16_t*>(dst), n); break;
    case GgmlType::kBF16: QuantizeRowBf16(src, static_cast<uint16_t*>(dst), n); break;
    case GgmlType::kQ8_0: QuantizeWeightsQ8_0(src, static_cast<BlockQ8_0*>(dst), n); break;
    case GgmlType::kQ4_K: QuantizeRowQ4_K(src, static_cast<BlockQ4_K*>(dst), n); break;
    case GgmlType::kQ6_K: QuantizeRowQ6_K(src, static_cast<BlockQ6_K*>(dst), n); break;
    case GgmlType::kQ8_K: QuantizeRowQ8_K(src, static_cast<BlockQ8_K*>(dst), n); break;
    default: return Internal("quantize: unhandled {}", GgmlTypeName(type));
  }
  return Status::Ok();
}

Status CheckBlockScales(GgmlType type, const void* data, int64_t rows, int64_t n, int64_t first_row) {
  // Bytes per block, elements per block, and the offsets of its f16 scale and min (-1: none).
  struct Layout {
    int bytes, elems, scale, min;
  };
  Layout l{};
  switch (type) {
    case GgmlType::kQ8_0: l = {34, 32, 0, -1}; break;
    case GgmlType::kQ4_0: l = {18, 32, 0, -1}; break;
    case GgmlType::kQ4_1: l = {20, 32, 0, 2}; break;
    case GgmlType::kQ5_0: l = {22, 32, 0, -1}; break;
    case GgmlType::kQ5_1: l = {24, 32, 0, 2}; break;
    case GgmlType::kQ4_K: l = {144, 256, 0, 2}; break;
    case GgmlType::kQ5_K: l = {176, 256, 0, 2}; break;
    case GgmlType::kQ6_K: l = {210, 256, 208, -1}; break;
    default: return Status::Ok();
  }
  if (n % l.elems != 0)
    return InvalidArgument("{} rows of {} elements are not whole blocks", GgmlTypeName(type), n);
  const int64_t nb = n / l.elems;
  const auto* p = static_cast<const uint8_t*>(data);
  auto finite = [](const uint8_t* h) { return (((h[1] << 8) | h[0]) & 0x7C00) != 0x7C00; };
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b, p += l.bytes) {
      if (!finite(p + l.scale) || (l.min >= 0 && !finite(p + l.min))) {
        return Corrupt("row {}, block {}: its {} scale is not finite (NaN or infinity)", first_row + r, b,
                       finite(p + l.scale) ? "min" : "f16");
      }
    }
  }
  return Status::Ok();
}

}  // namespace fak
