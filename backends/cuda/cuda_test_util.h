// What the CUDA backend's tests share: random inputs, the float64 error measure, quantized test
// matrices, the CPU and CUDA backends side by side, and moving values in and out of a backend.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_info.h"
#include "quant/codec.h"

namespace fak::cuda_test {

#define SKIP_WITHOUT_GPU() \
  if (cuda::ListDevices().empty()) GTEST_SKIP() << "skipped: no GPU"

inline std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// ||a - b|| / ||b||.
inline double NormalizedError(const float* a, const double* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// An environment variable set for a scope (the backend's mode switches), unset again however the scope
// ends.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

// A matrix of `type` made from random f32 values, as GGUF rows.
struct TestMatrix {
  GgmlType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // what the bytes mean
  Weight weight() const {
    return {type, rows, cols, bytes.size() / static_cast<size_t>(rows), bytes.data(), false};
  }
};

inline TestMatrix MakeMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  TestMatrix m{type, rows, cols, {}, {}};
  const size_t row_bytes = *GgmlRowBytes(type, static_cast<uint64_t>(cols));
  m.bytes.resize(row_bytes * static_cast<size_t>(rows));
  m.deq.resize(static_cast<size_t>(rows * cols));
  const std::vector<float> src = Random(static_cast<size_t>(rows * cols), seed, 0.05f);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(QuantizeRow(type, &src[static_cast<size_t>(r * cols)],
                            &m.bytes[static_cast<size_t>(r) * row_bytes], cols)
                    .ok());
    EXPECT_TRUE(DequantizeRow(type, &m.bytes[static_cast<size_t>(r) * row_bytes],
                              &m.deq[static_cast<size_t>(r * cols)], cols)
                    .ok());
  }
  return m;
}

// The two backends side by side on the same inputs.
struct Pair {
  std::unique_ptr<Backend> cpu = cpu::CreateCpuBackend({.threads = 2});
  std::unique_ptr<Backend> gpu;
  Pair() {
    auto g = cuda::CreateCudaBackend();
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    if (g.ok()) gpu = std::move(*g);
  }
};

// Uploads host values into a new tensor of `be`.
inline Tensor Upload(Backend& be, const std::vector<float>& v, int64_t rows, int64_t cols,
                     const BatchPlan& plan) {
  auto t = be.Alloc(rows, cols);
  EXPECT_TRUE(t.ok());
  // There is no upload call in the seam: an f32 embedding table carries the values in.
  static std::vector<std::vector<float>> keep;
  keep.push_back(v);
  Weight table{GgmlType::kF32,
               rows * cols / cols,
               cols,
               static_cast<size_t>(cols) * 4,
               reinterpret_cast<const uint8_t*>(keep.back().data()),
               false};
  auto e = be.BindEmbedding(table, GgmlType::kF32);
  EXPECT_TRUE(e.ok());
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) ids[static_cast<size_t>(r)] = static_cast<int32_t>(r);
  BatchPlan p = plan;
  p.tokens = ids;
  be.SetBatch(p);
  be.Embed(*e, *t);
  EXPECT_TRUE(be.Synchronize().ok());
  return *t;
}

inline std::vector<float> Fetch(Backend& be, Tensor t) {
  std::vector<float> out(static_cast<size_t>(t.rows * t.cols));
  be.Download(t, out.data());
  const Status s = be.Synchronize();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// A plan of `rows` rows of one sequence at positions 0..rows-1 over pages 0..
struct OneSeq {
  std::vector<int32_t> tokens, positions, row_seq, page_begin, pages, out_rows;
  OneSeq(int64_t rows, int64_t page_tokens) {
    for (int64_t r = 0; r < rows; ++r) {
      tokens.push_back(0);
      positions.push_back(static_cast<int32_t>(r));
      row_seq.push_back(0);
      out_rows.push_back(static_cast<int32_t>(r));
    }
    for (int64_t p = 0; p * page_tokens < rows; ++p) pages.push_back(static_cast<int32_t>(p));
    page_begin = {0, static_cast<int32_t>(pages.size())};
  }
  BatchPlan plan() const {
    return {tokens, positions, row_seq, page_begin, pages, out_rows, static_cast<int64_t>(tokens.size()), {}};
  }
};

}  // namespace fak::cuda_test
