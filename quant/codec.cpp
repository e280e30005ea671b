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

}  // namespace fak
