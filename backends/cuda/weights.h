// Device layouts of weight matrices, made on the host from GGUF rows before upload.
//
//   q8_0: quants (rows, cols) int8, row-major, rows 32-byte aligned (cols % 32 == 0);
//         scales (rows, cols / 32) f16 in a separate array.
//   q4_k: the GGUF blocks as stored: 144 bytes = a 16-byte header (d, dmin, scales[12]) and 128 bytes
//         of nibbles, so every 16-byte load is aligned.
//   q6_k: per block 208 bytes (ql[128], qh[64], scales[16]) and the f16 d in a separate array: the
//         GGUF block is 210 bytes, only 2-byte aligned.
//   f16, bf16, f32: the rows as stored.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cuda/kernels.h"  // MatFormat
#include "core/status.h"
#include "ops/weight.h"

namespace fak::cuda {

struct HostMatrix {
  MatFormat format = MatFormat::kF32;
  std::vector<uint8_t> q;   // quants, blocks or values
  std::vector<uint16_t> d;  // separate f16 scales (q8_0, q6_k)
};

// The device layout of w (GGUF rows, not the CPU's packed layout); an error naming the type or shape
// the CUDA kernels cannot read.
Result<HostMatrix> RepackForDevice(const Weight& w);

// Back to f32 rows from the device layout: what the repacked bytes mean, for tests.
Result<std::vector<float>> DequantizeDeviceLayout(const HostMatrix& m, int64_t rows, int64_t cols);

}  // namespace fak::cuda
