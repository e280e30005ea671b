// The read-only q4_0, q4_1, q5_0 and q5_1 blocks against gguf-py's numpy dequantization: two blocks of
// each format with patterned quant bytes, their 64 values hashed (FNV-1a over the f32 bytes, no
// OpenSSL: this test also runs in the arm64 cross build) and four spot values, all recorded with
// gguf-py (tools/oracle is not needed to rerun the test). quant_gguf_test-style whole-file checks
// against llama-quantize's output are in docs/quant.md.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "quant/codec.h"

namespace fak {
namespace {

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

uint64_t Fnv(const std::vector<float>& v) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* b = reinterpret_cast<const uint8_t*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

struct Case {
  GgmlType type;
  const char* hex;
  float y0, y1, y2, y33;
  uint64_t fnv;
};

TEST(LegacyFormats, DequantizeEqualsGgufPy) {
  const Case cases[] = {
      {GgmlType::kQ4_0, "4c22557a9fc4e90e33587da2c7ec11365b804c26ef14395e83a8cdf2173c6186abd0f51a",
       -0.036895751953125f, 0.02459716796875f, 0.086090087890625f, -0.098388671875f, 0x08c84d849a524322ull},
      {GgmlType::kQ4_1, "4c2200b49fc4e90e33587da2c7ec11365b80a5ca4c26003a83a8cdf2173c6186abd0f51a3f6489ae",
       -0.065521240234375f, -0.2008056640625f, -0.139312744140625f, 0.94677734375f, 0x56ac75b7646b081aull},
      {GgmlType::kQ5_0,
       "4c22557a9fc4e90e33587da2c7ec11365b80a5caef144c2683a8cdf2173c6186abd0f51a3f6489aed3f81d42",
       0.110687255859375f, -0.02459716796875f, 0.036895751953125f, 0.295166015625f, 0xbb229cff202b85f9ull},
      {GgmlType::kQ5_1,
       "4c2200b49fc4e90e33587da2c7ec11365b80a5caef14395e4c26003a173c6186abd0f51a3f6489aed3f81d42678cb1d6",
       -0.016326904296875f, 0.045166015625f, 0.106658935546875f, 1.1435546875f, 0x47d5a2c2caa15a02ull},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(GgmlTypeName(c.type)));
    const std::vector<uint8_t> bytes = FromHex(c.hex);
    std::vector<float> y(64);
    ASSERT_TRUE(CanDequantize(c.type));
    EXPECT_FALSE(CanQuantize(c.type));  // read-only
    ASSERT_TRUE(DequantizeRow(c.type, bytes.data(), y.data(), 64).ok());
    EXPECT_EQ(y[0], c.y0);
    EXPECT_EQ(y[1], c.y1);
    EXPECT_EQ(y[2], c.y2);
    EXPECT_EQ(y[33], c.y33);
    EXPECT_EQ(Fnv(y), c.fnv) << std::hex << Fnv(y);
    EXPECT_FALSE(DequantizeRow(c.type, bytes.data(), y.data(), 48).ok());  // not a whole block
  }
}

}  // namespace
}  // namespace fak
