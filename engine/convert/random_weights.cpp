#include "engine/convert/random_weights.h"

#include <cmath>

namespace fak::convert {
namespace {

// The splitmix64 finalizer: a bijective mix with full avalanche, cheap enough to run per element.
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t TensorKey(uint64_t seed, std::string_view tensor_name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the name
  for (char c : tensor_name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return Mix(Mix(seed + 0x9e3779b97f4a7c15ull) ^ h);
}

void FillRandomRow(uint64_t key, uint64_t first_index, float mean, float stddev, float* out, int64_t n) {
  // Four 16-bit uniforms on {0..65535} sum to mean 4 * 32767.5 and variance 4 * (65536^2 - 1) / 12.
  constexpr double kMean = 4 * 32767.5;
  const double sd = std::sqrt(4.0 * (65536.0 * 65536.0 - 1.0) / 12.0);
  const float scale = static_cast<float>(stddev / sd);
  const float offset = static_cast<float>(mean - kMean * stddev / sd);
  for (int64_t j = 0; j < n; ++j) {
    const uint64_t x = Mix(key ^ ((first_index + static_cast<uint64_t>(j)) * 0x9e3779b97f4a7c15ull));
    const uint32_t s = static_cast<uint32_t>(x & 0xffff) + static_cast<uint32_t>((x >> 16) & 0xffff) +
                       static_cast<uint32_t>((x >> 32) & 0xffff) + static_cast<uint32_t>(x >> 48);
    out[j] = static_cast<float>(s) * scale + offset;
  }
}

}  // namespace fak::convert
