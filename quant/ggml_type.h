// The ggml tensor type ids as GGUF stores them, with each type's block geometry. Ids and names are
// part of the file format: never renumber or rename.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fak {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;  // lower-case, as fak persists it: "q8_0", "q4_k", "bf16"
  uint32_t block_size;    // elements per block
  uint32_t type_size;     // bytes per block
};

// nullopt for ids that are unassigned or were removed from ggml.
std::optional<GgmlTypeTraits> GetGgmlTypeTraits(uint32_t id);
inline std::optional<GgmlTypeTraits> GetGgmlTypeTraits(GgmlType t) {
  return GetGgmlTypeTraits(static_cast<uint32_t>(t));
}
// "q4_k" or "Q4_K" -> kQ4_K.
std::optional<GgmlType> GgmlTypeFromName(std::string_view name);
std::string_view GgmlTypeName(GgmlType t);  // "?" for unknown

// Bytes of a row of n elements; nullopt when n is not a whole number of blocks or would overflow.
std::optional<uint64_t> GgmlRowBytes(GgmlType t, uint64_t n);

}  // namespace fak
