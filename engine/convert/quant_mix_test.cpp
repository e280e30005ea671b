#include "engine/convert/quant_mix.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/convert/model_plan.h"

namespace fak::convert {
namespace {

GgmlType TypeOf(FileType ft, const ModelConfig& c, const PlannedTensor& t) {
  return TensorTypeFor(ft, TensorDesc{t.name, static_cast<int>(t.shape.size()),
                                      static_cast<int64_t>(t.shape[0]), c.n_layer, t.output, t.more_bits});
}

TEST(QuantMix, FileTypeNamesAndLlamaNumbers) {
  EXPECT_EQ(FileTypeFromName("q4_k_m")->llama_ftype, 15u);
  EXPECT_EQ(FileTypeFromName("Q8_0")->llama_ftype, 7u);
  EXPECT_EQ(FileTypeFromName("f16")->llama_ftype, 1u);
  EXPECT_EQ(FileTypeFromName("bf16")->llama_ftype, 32u);
  EXPECT_EQ(FileTypeFromName("q6_k")->llama_ftype, 18u);
  EXPECT_EQ(FileTypeFromName("q4_k")->llama_ftype, 14u);
  auto bad = FileTypeFromName("q5_k_m");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("q4_k_m"), std::string::npos) << bad.status().message();
}

TEST(QuantMix, UseMoreBitsPicksLlamaCppsLayers) {
  std::vector<int64_t> picked;
  for (int64_t l = 0; l < 32; ++l) {
    if (UseMoreBits(l, 32)) picked.push_back(l);
  }
  EXPECT_EQ(picked, (std::vector<int64_t>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
  picked.clear();
  for (int64_t l = 0; l < 28; ++l) {
    if (UseMoreBits(l, 28)) picked.push_back(l);
  }
  EXPECT_EQ(picked, (std::vector<int64_t>{0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27}));
}

TEST(QuantMix, Q4KMOnQwen25_1_5B) {
  auto c = ConfigForGeometry(*FindGeometry("qwen2.5-1.5b"), "", kSynthVocab);
  ASSERT_TRUE(c.ok());
  int q6_v = 0, q6_down = 0, q4 = 0, f32 = 0;
  for (const PlannedTensor& t : PlanTensors(*c)) {
    const GgmlType type = TypeOf(FileType::kQ4_K_M, *c, t);
    if (t.name == "token_embd.weight") {
      EXPECT_EQ(type, GgmlType::kQ6_K);  // tied: it is the output matrix
    }
    if (t.name.ends_with("attn_v.weight") && type == GgmlType::kQ6_K) ++q6_v;
    if (t.name.ends_with("ffn_down.weight") && type == GgmlType::kQ6_K) ++q6_down;
    if (type == GgmlType::kQ4_K) ++q4;
    if (type == GgmlType::kF32) ++f32;
  }
  EXPECT_EQ(q6_v, 14);
  EXPECT_EQ(q6_down, 14);
  EXPECT_EQ(q4, 28 * 7 - 28);
  EXPECT_EQ(f32, 28 * 5 + 1);  // two norms and three biases per layer, the output norm
}

TEST(QuantMix, Q4KMOnUntiedLlama3_8B) {
  auto c = ConfigForGeometry(*FindGeometry("llama3-8b"), "", kSynthVocab);
  ASSERT_TRUE(c.ok());
  const auto plan = PlanTensors(*c);
  for (const PlannedTensor& t : plan) {
    const GgmlType type = TypeOf(FileType::kQ4_K_M, *c, t);
    if (t.name == "token_embd.weight") {
      EXPECT_EQ(type, GgmlType::kQ4_K);
    }
    if (t.name == "output.weight") {
      EXPECT_EQ(type, GgmlType::kQ6_K);
    }
    if (t.name == "blk.6.attn_v.weight") {
      EXPECT_EQ(type, GgmlType::kQ6_K);
    }
    if (t.name == "blk.7.attn_v.weight") {
      EXPECT_EQ(type, GgmlType::kQ4_K);
    }
    if (t.name == "blk.7.attn_output.weight") {
      EXPECT_EQ(type, GgmlType::kQ4_K);
    }
  }
  EXPECT_EQ(plan.back().name, "output.weight");
}

TEST(QuantMix, RowLengthFallbacks) {
  // Qwen2.5-0.5B: d_model 896 is not a multiple of 256. llama.cpp stores those Q4_K matrices as Q5_0,
  // which fak lacks: Q8_0. The tied embedding's Q6_K becomes Q8_0 as in llama.cpp.
  auto c = ConfigForGeometry(*FindGeometry("qwen2.5-0.5b"), "", kSynthVocab);
  ASSERT_TRUE(c.ok());
  for (const PlannedTensor& t : PlanTensors(*c)) {
    const GgmlType type = TypeOf(FileType::kQ4_K_M, *c, t);
    if (t.name == "token_embd.weight") {
      EXPECT_EQ(type, GgmlType::kQ8_0);
    }
    if (t.name == "blk.3.attn_q.weight") {
      EXPECT_EQ(type, GgmlType::kQ8_0);
    }
    if (t.name == "blk.3.ffn_down.weight") {
      EXPECT_EQ(type, GgmlType::kQ4_K);  // rows of 4864 = 19 x 256
    }
    if (t.name == "blk.0.ffn_down.weight") {
      EXPECT_EQ(type, GgmlType::kQ6_K);
    }
  }
  EXPECT_EQ(FallbackForRow(GgmlType::kQ8_0, 48), GgmlType::kF16);
  EXPECT_EQ(FallbackForRow(GgmlType::kQ6_K, 96), GgmlType::kQ8_0);
  EXPECT_EQ(FallbackForRow(GgmlType::kQ4_K, 512), GgmlType::kQ4_K);
}

TEST(QuantMix, OnlyMatricesAreQuantized) {
  EXPECT_EQ(TensorTypeFor(FileType::kQ8_0, {"blk.0.attn_norm.weight", 1, 256, 2, false}), GgmlType::kF32);
  EXPECT_EQ(TensorTypeFor(FileType::kQ8_0, {"blk.0.attn_q.bias", 1, 256, 2, false}), GgmlType::kF32);
  EXPECT_EQ(TensorTypeFor(FileType::kQ8_0, {"blk.0.attn_q_norm.weight", 2, 256, 2, false}), GgmlType::kF32);
  EXPECT_EQ(TensorTypeFor(FileType::kF16, {"blk.0.attn_q.weight", 2, 100, 2, false}), GgmlType::kF16);
  EXPECT_EQ(TensorTypeFor(FileType::kQ4_K, {"output.weight", 2, 256, 2, true}), GgmlType::kQ4_K);  // pure
  EXPECT_EQ(TensorTypeFor(FileType::kQ6_K, {"output.weight", 2, 256, 2, true}), GgmlType::kQ6_K);
  EXPECT_EQ(TensorTypeFor(FileType::kQ8_0, {"output.weight", 2, 256, 2, true}), GgmlType::kQ8_0);
  EXPECT_EQ(TensorTypeFor(FileType::kQ4_K_M, {"output.weight", 2, 256, 2, true}), GgmlType::kQ6_K);
  EXPECT_EQ(LayerOf("blk.17.ffn_down.weight"), 17);
  EXPECT_EQ(LayerOf("blk.x.ffn_down.weight"), -1);
  EXPECT_EQ(LayerOf("output.weight"), -1);
}

}  // namespace
}  // namespace fak::convert
