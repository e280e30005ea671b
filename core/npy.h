// NumPy .npy files (version 1.0, little-endian float32, C order): the logits dumps and the oracle
// fixtures use them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace fak {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

Result<NpyArray> ReadNpyF32(const std::string& path);
Status WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data);

}  // namespace fak
