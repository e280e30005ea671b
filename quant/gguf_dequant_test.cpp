// Dequantizes every tensor of the llamacpp-tiny GGUF files and compares the SHA-256 of the f32 output
// with the hashes gguf-py computed (../shared/fixtures/llamacpp-tiny/expected/dequant_sha256.json).
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

}  // namespace
}  // namespace fak
