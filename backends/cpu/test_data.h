// Random weight matrices and activations for kernel tests and benchmarks: raw random quants, plus
// all-zero blocks, extreme and tiny (subnormal f16) scales.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "quant/ggml_type.h"  // GgmlType

namespace fak::cpu {

struct RandomMatrix {
  GgmlType type;
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
  std::vector<uint8_t> data;  // (rows, row_bytes)
};

// `special` mixes in the edge cases (zero blocks, extreme and tiny scales) at random positions.
RandomMatrix MakeRandomMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed, bool special = true);

// (n_tokens, ActivationRowBytes) activation blocks from random floats; with `special`, some blocks are
// zero, some huge and some tiny.
std::vector<uint8_t> MakeRandomActivations(GgmlType type, int64_t n_tokens, int64_t cols, uint32_t seed,
                                           bool special = true);

// The bits of f as 8 hex digits, for test messages that must show exact values.
std::string FloatHex(float f);

}  // namespace fak::cpu
