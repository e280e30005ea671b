#include "quant/codec.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace fak {
namespace {

TEST(Codec, RejectsPartialBlocksAndUnknownTypes) {
  std::vector<float> x(256), y(256);
  std::vector<uint8_t> buf(1024);
  Status s = DequantizeRow(GgmlType::kQ4_K, buf.data(), y.data(), 100);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q4_k"), std::string::npos) << s.message();
  EXPECT_EQ(QuantizeRow(GgmlType::kQ8_0, x.data(), buf.data(), 33).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DequantizeRow(GgmlType::kIQ2_XXS, buf.data(), y.data(), 256).code(), StatusCode::kUnsupported);
  EXPECT_EQ(DequantizeRow(GgmlType::kQ8_0, buf.data(), y.data(), -32).code(), StatusCode::kInvalidArgument);
}

double RmseRoundTrip(GgmlType t, const std::vector<float>& x, double* rel) {
  std::vector<uint8_t> buf(*GgmlRowBytes(t, x.size()));
  std::vector<float> y(x.size());
  EXPECT_TRUE(QuantizeRow(t, x.data(), buf.data(), static_cast<int64_t>(x.size())).ok());
  EXPECT_TRUE(DequantizeRow(t, buf.data(), y.data(), static_cast<int64_t>(x.size())).ok());
  double se = 0, sx = 0;
  for (size_t i = 0; i < x.size(); ++i) se += (x[i] - y[i]) * (x[i] - y[i]), sx += x[i] * x[i];
  *rel = std::sqrt(se / sx);
  return std::sqrt(se / static_cast<double>(x.size()));
}

// Quantization quality on weight-shaped data: 64 rows of 4096 drawn from N(0, 0.02) (typical init
// scale) and from a Student-t with 3 degrees of freedom (heavy tails, as in real attention and FFN
// weights). Bounds are loose ceilings; the measured values are printed and kept in docs/quant.md.
TEST(Codec, QuantizationQuality) {
  std::mt19937 rng(10);
  std::normal_distribution<float> g(0.0f, 0.02f);
  std::student_t_distribution<float> t3(3.0f);
  std::vector<float> normal(64 * 4096), heavy(64 * 4096);
  for (auto& v : normal) v = g(rng);
  for (auto& v : heavy) v = 0.01f * t3(rng);
  struct Case {
    GgmlType type;
    double max_rel_normal, max_rel_heavy;
  } cases[] = {
      {GgmlType::kF16, 1e-3, 1e-3},  {GgmlType::kBF16, 5e-3, 5e-3}, {GgmlType::kQ8_0, 0.01, 0.02},
      {GgmlType::kQ6_K, 0.03, 0.05}, {GgmlType::kQ4_K, 0.11, 0.16}, {GgmlType::kQ8_K, 0.01, 0.03},
  };
  for (const Case& c : cases) {
    double rel_n, rel_h;
    const double rmse_n = RmseRoundTrip(c.type, normal, &rel_n);
    const double rmse_h = RmseRoundTrip(c.type, heavy, &rel_h);
    std::printf("quality %-5s normal rmse %.3e (rel %.4f)  student-t3 rmse %.3e (rel %.4f)\n",
                std::string(GgmlTypeName(c.type)).c_str(), rmse_n, rel_n, rmse_h, rel_h);
    EXPECT_LT(rel_n, c.max_rel_normal) << GgmlTypeName(c.type);
    EXPECT_LT(rel_h, c.max_rel_heavy) << GgmlTypeName(c.type);
  }
}

// Non-finite f16 block scales (and K-quant mins) are found and named by row and block.
TEST(Codec, CheckBlockScalesNamesTheBlock) {
  std::vector<uint8_t> q8(2 * 2 * 34, 0);  // 2 rows of 64 elements
  EXPECT_TRUE(CheckBlockScales(GgmlType::kQ8_0, q8.data(), 2, 64).ok());
  q8[3 * 34] = 0x00, q8[3 * 34 + 1] = 0x7C;  // row 1, block 1: +infinity
  Status s = CheckBlockScales(GgmlType::kQ8_0, q8.data(), 2, 64);
  EXPECT_NE(s.message().find("row 1, block 1: its f16 scale is not finite"), std::string::npos)
      << s.ToString();
  std::vector<uint8_t> q4k(144, 0);
  q4k[3] = 0x7E;  // dmin NaN
  s = CheckBlockScales(GgmlType::kQ4_K, q4k.data(), 1, 256);
  EXPECT_NE(s.message().find("row 0, block 0: its min scale is not finite"), std::string::npos)
      << s.ToString();
  std::vector<uint8_t> q6k(210, 0);
  q6k[209] = 0xFC;  // d = -infinity (the last two bytes)
  EXPECT_FALSE(CheckBlockScales(GgmlType::kQ6_K, q6k.data(), 1, 256).ok());
  EXPECT_TRUE(CheckBlockScales(GgmlType::kF16, q6k.data(), 1, 64).ok());  // no block scales
}

}  // namespace
}  // namespace fak
