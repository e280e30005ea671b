// Deterministic random weights for synthetic models: every value is a pure function of (seed, tensor
// name, element index), so rows can be generated in any order on any number of threads and a file
// is reproducible byte for byte.
#pragma once

#include <cstdint>
#include <string_view>

namespace fak::convert {

// 64-bit key of a tensor under a seed; feed it to FillRandomRow.
uint64_t TensorKey(uint64_t seed, std::string_view tensor_name);

// out[j] = mean + stddev * z(first_index + j) for j in [0, n), where z is a normal-ish variate
// (sum of four uniforms, unit variance, bounded at about ±3.46) hashed from (key, index).
void FillRandomRow(uint64_t key, uint64_t first_index, float mean, float stddev, float* out, int64_t n);

}  // namespace fak::convert
