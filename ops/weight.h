// A weight as the CPU ops read it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/ggml_type.h"

namespace fak {

// A matrix (rows, cols) in a GGUF block format, or a vector (rows == 1) in f32. With `packed`, the
// matrix is in the row-interleaved layout of backends/cpu/packed.h (row() does not apply).
struct Weight {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  const uint8_t* data = nullptr;
  bool packed = false;

  bool present() const { return data != nullptr; }
  const float* f32() const { return reinterpret_cast<const float*>(data); }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

}  // namespace fak
