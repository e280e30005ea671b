// One entry point per direction over every supported block format, for loaders and converters.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "quant/ggml_type.h"

namespace fak {

// True for the types DequantizeRow handles: f32, f16, bf16, q8_0, q4_k, q6_k, q8_k, and the read-only
// q4_0, q4_1, q5_0, q5_1.
bool CanDequantize(GgmlType type);
// True for the types QuantizeRow produces: f32, f16, bf16, q8_0, q4_k, q6_k, q8_k.
bool CanQuantize(GgmlType type);

// Decodes n elements (a whole number of blocks) from `src` into f32.
Status DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);
// Encodes n f32 elements into `dst`, which must hold GgmlRowBytes(type, n) bytes.
Status QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace fak
