#include "backends/cpu/matmul.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "quant/codec.h"

namespace fak::cpu {
namespace {

TEST(MatMul, RejectsBadShapesAndTypes) {
  std::vector<uint8_t> buf(1 << 16);
  EXPECT_EQ(MakeQuantMatrix(GgmlType::kQ4_K, buf.data(), 4, 100).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeQuantMatrix(GgmlType::kIQ2_XS, buf.data(), 4, 256).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(MakeQuantMatrix(GgmlType::kQ8_0, nullptr, 4, 256).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeQuantMatrix(GgmlType::kQ8_0, buf.data(), 0, 256).status().code(),
            StatusCode::kInvalidArgument);
}

// The op against a float computation on dequantized weights, for every format, with threads, and
// identical across thread counts and batch sizes.
TEST(MatMul, MatchesDequantizedFloatMath) {
  std::mt19937 rng(42);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t rows = 37, cols = 512, n_tokens = 5;
  std::vector<float> wf(rows * cols), x(n_tokens * cols);
  for (auto& v : wf) v = 0.05f * g(rng);
  for (auto& v : x) v = g(rng);
  ThreadPool pool2(2), pool1(1);
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const size_t row_bytes = *GgmlRowBytes(type, cols);
    std::vector<uint8_t> wq(row_bytes * rows);
    std::vector<float> wd(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(QuantizeRow(type, wf.data() + r * cols, wq.data() + r * row_bytes, cols).ok());
      ASSERT_TRUE(DequantizeRow(type, wq.data() + r * row_bytes, wd.data() + r * cols, cols).ok());
    }
    auto m = MakeQuantMatrix(type, wq.data(), rows, cols);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    std::vector<float> y(n_tokens * rows), y1(n_tokens * rows), yv(rows);
    ASSERT_TRUE(MatMul(*m, x.data(), n_tokens, y.data(), pool2).ok());
    ASSERT_TRUE(MatMul(*m, x.data(), n_tokens, y1.data(), pool1).ok());
    EXPECT_EQ(std::memcmp(y.data(), y1.data(), y.size() * 4), 0) << GgmlTypeName(type);
    ASSERT_TRUE(MatMul(*m, x.data() + 2 * cols, 1, yv.data(), pool2).ok());
    EXPECT_EQ(std::memcmp(yv.data(), y.data() + 2 * rows, rows * 4), 0) << GgmlTypeName(type);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < cols; ++i) {
          ref += static_cast<double>(wd[r * cols + i]) * x[t * cols + i];
          mag += std::fabs(wd[r * cols + i] * x[t * cols + i]);
        }
        // Activation quantization (8 bits per block) bounds the error for the integer formats.
        const double tol = (type == GgmlType::kF16 || type == GgmlType::kBF16) ? 1e-5 * mag : 0.02 * mag;
        ASSERT_NEAR(y[t * rows + r], ref, tol) << GgmlTypeName(type) << " t " << t << " r " << r;
      }
    }
  }
}

}  // namespace
}  // namespace fak::cpu
