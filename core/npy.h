// NumPy .npy files (version 1.0, little-endian float32, C order): the logits dumps and the oracle
// fixtures use them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
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

// A (rows, cols) f32 .npy file written a row at a time: the file is created (and its errors reported)
// before the first row, rows go straight to disk, and Finish() writes the final row count into the
// header. A writer destroyed without Finish() removes its partial file.
class NpyRowWriter {
 public:
  static Result<std::unique_ptr<NpyRowWriter>> Create(const std::string& path, int64_t cols);
  ~NpyRowWriter();
  NpyRowWriter(const NpyRowWriter&) = delete;
  NpyRowWriter& operator=(const NpyRowWriter&) = delete;

  Status Append(std::span<const float> row);  // row.size() == cols
  Status Finish();

 private:
  NpyRowWriter(std::string path, std::FILE* f, int64_t cols) : path_(std::move(path)), f_(f), cols_(cols) {}
  std::string path_;
  std::FILE* f_;
  int64_t cols_, rows_ = 0;
};

}  // namespace fak
