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

// Checks that every f16 block scale (and min) of `rows` rows of n elements of a block format is finite:
// a NaN or infinite scale would make a whole block's products non-finite, and the int8 quantization
// of the next layer's input turns non-finite values into finite ones, so the damage would pass
// unseen. Ok for types without f16 block scales (f32, f16, bf16, q8_k). The error names the row and block.
// first_row: the row number of the first of these rows, for the message.
Status CheckBlockScales(GgmlType type, const void* data, int64_t rows, int64_t n, int64_t first_row = 0);

}  // namespace fak
