// Dequantizes every tensor of the llamacpp-tiny GGUF files and compares the SHA-256 of the f32 output
// with the hashes gguf-py computed (../shared/fixtures/llamacpp-tiny/expected/dequant_sha256.json).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/sha256.h"
#include "formats/gguf.h"
#include "quant/codec.h"

namespace fak {
namespace {

const char* kDir = "../shared/fixtures/llamacpp-tiny";

TEST(GgufDequant, MatchesGgufPyHashes) {
  const std::string expected_path = std::string(kDir) + "/expected/dequant_sha256.json";
  if (!std::filesystem::exists(expected_path)) GTEST_SKIP() << "skipped: fixtures not found at " << kDir;
  std::ifstream in(expected_path);
  const nlohmann::json expected = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& [file, tensors] : expected.items()) {
    auto gguf = GgufFile::Open(std::string(kDir) + "/" + file);
    ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
    for (const auto& [name, info] : tensors.items()) {
      const GgufTensorInfo* t = gguf->FindTensor(name);
      ASSERT_NE(t, nullptr) << file << ": " << name;
      EXPECT_EQ(GgmlTypeName(t->type), GgmlTypeName(*GgmlTypeFromName(info["type"].get<std::string>())));
      std::vector<float> out(t->n_elements);
      const int64_t row = static_cast<int64_t>(t->shape[0]);
      const uint64_t row_bytes = *GgmlRowBytes(t->type, row);
      for (uint64_t r = 0; r < t->n_elements / row; ++r) {
        Status s = DequantizeRow(t->type, t->data + r * row_bytes, out.data() + r * row, row);
        ASSERT_TRUE(s.ok()) << file << ": " << name << ": " << s.ToString();
      }
      const std::string hex =
          Sha256Hex(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(out.data()), out.size() * 4));
      EXPECT_EQ(hex, info["dequant_f32_sha256"].get<std::string>())
          << file << ": " << name << " (" << info["type"] << ")";
      for (size_t i = 0; i < 8 && i < out.size(); ++i) EXPECT_EQ(out[i], info["first8"][i].get<float>());
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

// `fak quantize` writes the bytes llama-quantize writes: every Q8_0, Q4_K and Q6_K tensor of the
// llamacpp-tiny files (made by llama-quantize from the F16 file, no importance matrix) is quantized
// again from the F16 file's tensor and compared block for block.
TEST(GgufQuantize, BytesEqualLlamaQuantize) {
  auto f16 = GgufFile::Open(std::string(kDir) + "/tiny-llama-f16.gguf");
  if (!f16.ok()) GTEST_SKIP() << "skipped: fixtures not found at " << kDir;
  int checked = 0;
  for (const char* file : {"tiny-llama-q8_0.gguf", "tiny-llama-q4_k_m.gguf", "tiny-llama-q6_k.gguf"}) {
    auto quantized = GgufFile::Open(std::string(kDir) + "/" + file);
    ASSERT_TRUE(quantized.ok()) << quantized.status().ToString();
    for (const GgufTensorInfo& t : quantized->tensors()) {
      if (t.type != GgmlType::kQ8_0 && t.type != GgmlType::kQ4_K && t.type != GgmlType::kQ6_K) continue;
      const GgufTensorInfo* src = f16->FindTensor(t.name);
      ASSERT_NE(src, nullptr) << t.name;
      ASSERT_EQ(src->n_elements, t.n_elements) << t.name;
      const int64_t row = static_cast<int64_t>(t.shape[0]);
      const uint64_t src_row_bytes = *GgmlRowBytes(src->type, row);
      const uint64_t row_bytes = *GgmlRowBytes(t.type, row);
      std::vector<float> x(static_cast<size_t>(row));
      std::vector<uint8_t> out(row_bytes);
      uint64_t differing_rows = 0;
      for (uint64_t r = 0; r < t.n_elements / row; ++r) {
        ASSERT_TRUE(DequantizeRow(src->type, src->data + r * src_row_bytes, x.data(), row).ok());
        ASSERT_TRUE(QuantizeRow(t.type, x.data(), out.data(), row).ok());
        if (std::memcmp(out.data(), t.data + r * row_bytes, row_bytes) != 0) ++differing_rows;
      }
      EXPECT_EQ(differing_rows, 0u) << file << ": " << t.name << " (" << GgmlTypeName(t.type) << ")";
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

}  // namespace
}  // namespace fak
