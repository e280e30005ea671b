#include "formats/model_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"

namespace fak {
namespace {

constexpr const char* kQwen25_1_5B = R"({
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1536,
  "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
  "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645, "rope_scaling": null})";

TEST(ModelConfig, Qwen2FromHfJson) {
  auto c = ModelConfigFromHfJson(kQwen25_1_5B, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, "qwen2");
  EXPECT_EQ(c->hf_architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c->n_layer, 28);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->n_kv_head, 2);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->rope.theta, 1e6);
  EXPECT_EQ(c->rope.scaling, RopeScaling::kNone);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{151645}));
}

TEST(ModelConfig, Llama3RopeScalingAndQwen3HeadDim) {
  auto l = ModelConfigFromHfJson(R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "rope_theta": 500000.0, "eos_token_id": [128001, 128009],
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})",
                                 "llama.json");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->rope.scaling, RopeScaling::kLlama3);
  EXPECT_EQ(l->rope.factor, 8.0);
  EXPECT_EQ(l->rope.original_max_position, 8192);
  EXPECT_FALSE(l->qkv_bias);
  EXPECT_EQ(l->eos_token_ids.size(), 2u);
  auto q3 = ModelConfigFromHfJson(R"({"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
    "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 151936, "attention_bias": false})",
                                  "q3.json");
  ASSERT_TRUE(q3.ok()) << q3.status().ToString();
  EXPECT_EQ(q3->head_dim, 128);  // not hidden/heads = 64
  EXPECT_TRUE(q3->qk_norm);
  EXPECT_FALSE(q3->qkv_bias);
}

TEST(ModelConfig, Transformers5RopeParameters) {
  auto c = ModelConfigFromHfJson(R"({"model_type": "qwen2", "hidden_size": 16, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 100,
    "dtype": "bfloat16", "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}})",
                                 "t5.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope.theta, 1e6);
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  auto y = ModelConfigFromHfJson(R"({"model_type": "llama", "hidden_size": 16, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
    "rope_parameters": {"rope_theta": 5e5, "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}})",
                                 "y.json");
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y->rope.scaling, RopeScaling::kYarn);
  EXPECT_EQ(y->rope.theta, 5e5);
}

TEST(ModelConfig, HybridLayerTypes) {
  auto h =
      ModelConfigFromHfJson(R"({"model_type": "qwen3_5_text", "hidden_size": 2048, "intermediate_size": 6144,
    "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "vocab_size": 151936, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "partial_rotary_factor": 0.25})",
                            "h.json");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->arch, "qwen3_5");
  EXPECT_EQ(h->layer_is_linear, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(h->rope.partial_rotary_factor, 0.25);
}

// Qwen3-Next as its hub config has it: the full-attention period instead of a layer list, experts
// every decoder_sparse_step layers except mlp_only_layers.
TEST(ModelConfig, ExpertLayers) {
  auto n =
      ModelConfigFromHfJson(R"({"model_type": "qwen3_next", "hidden_size": 2048, "intermediate_size": 5120,
    "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "vocab_size": 151936, "full_attention_interval": 4, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "decoder_sparse_step": 2, "mlp_only_layers": [5]})",
                            "n.json");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->arch, "qwen3_next");
  EXPECT_EQ(n->layer_is_linear, (std::vector<bool>{true, true, true, false, true, true, true, false}));
  EXPECT_EQ(n->layer_is_moe, (std::vector<bool>{false, true, false, true, false, false, false, true}));
  EXPECT_EQ(n->n_expert, 512);
  EXPECT_EQ(n->n_expert_used, 10);
  EXPECT_EQ(n->d_shared_expert_ffn, 512);
  EXPECT_TRUE(n->norm_top_k);
  EXPECT_TRUE(n->qk_norm);
}

TEST(ModelConfig, BadInputNamesTheField) {
  auto err = [](const std::string& text) {
    auto c = ModelConfigFromHfJson(text, "cfg.json");
    return c.ok() ? std::string() : c.status().message();
  };
  EXPECT_NE(err("{").find("not a JSON object"), std::string::npos);
  EXPECT_NE(err(R"({"model_type": "gpt_neox"})").find("gpt_neox"), std::string::npos);
  EXPECT_NE(err(R"({"model_type": "llama"})").find("num_hidden_layers"), std::string::npos);
  EXPECT_NE(err(R"({"model_type": "llama", "num_hidden_layers": "two"})")
                .find("'num_hidden_layers' is not an integer"),
            std::string::npos);
  EXPECT_NE(
      err(R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                   "num_attention_heads": 6, "num_key_value_heads": 4, "vocab_size": 100})")
          .find("multiple of n_kv_head"),
      std::string::npos);
  EXPECT_NE(
      err(R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                   "num_attention_heads": 4, "vocab_size": 100, "rope_scaling": {"rope_type": "ntk-magic"}})")
          .find("ntk-magic"),
      std::string::npos);
  // Scalars that would run to non-finite activations are refused by name (hardening item 7).
  const std::string base = R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
      "intermediate_size": 128, "num_attention_heads": 4, "vocab_size": 100, )";
  EXPECT_NE(
      err(base + R"("rms_norm_eps": -1e-6})").find("rms_norm_eps = -1e-06 must be a finite number above 0"),
      std::string::npos);
  EXPECT_NE(err(base + R"("rope_theta": 0})").find("rope_theta = 0 must be"), std::string::npos);
  EXPECT_NE(err(base + R"("rope_theta": -10000})").find("rope_theta"), std::string::npos);
  EXPECT_EQ(err(base + R"("rope_theta": 500000})"), "");
}

// The same scalar checks on the GGUF path (hardening item 7): a NaN epsilon or a zero rope base in a
// file's metadata is refused by its key.
TEST(ModelConfig, BadGgufScalarsNameTheKey) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("fak_cfg_scalars_" + std::to_string(getpid()) + ".gguf"))
          .string();
  auto load = [&](float eps, float theta) {
    GgufWriter w;
    w.SetString("general.architecture", "llama");
    w.SetUint32("llama.block_count", 2);
    w.SetUint32("llama.embedding_length", 64);
    w.SetUint32("llama.feed_forward_length", 128);
    w.SetUint32("llama.attention.head_count", 4);
    w.SetUint32("llama.vocab_size", 100);
    w.SetFloat32("llama.attention.layer_norm_rms_epsilon", eps);
    w.SetFloat32("llama.rope.freq_base", theta);
    EXPECT_TRUE(w.Write(path).ok());
    auto f = GgufFile::Open(path);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    auto c = ModelConfigFromGguf(*f);
    std::remove(path.c_str());
    return c.ok() ? std::string() : c.status().message();
  };
  EXPECT_EQ(load(1e-5f, 10000.0f), "");
  EXPECT_NE(load(std::nanf(""), 10000.0f).find("rms_norm_eps = nan must be a finite number above 0"),
            std::string::npos)
      << load(std::nanf(""), 10000.0f);
  EXPECT_NE(load(1e-5f, 0.0f).find("rope_theta = 0 must be"), std::string::npos) << load(1e-5f, 0.0f);
}

TEST(ModelConfig, FromGgufMetadata) {
  auto f = GgufFile::Open("../shared/fixtures/llamacpp-tiny/tiny-llama-f16.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto c = ModelConfigFromGguf(*f);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, "llama");
  EXPECT_EQ(c->n_layer, 2);
  EXPECT_EQ(c->d_model, 256);
  EXPECT_EQ(c->d_ffn, 512);
  EXPECT_EQ(c->n_head, 4);
  EXPECT_EQ(c->n_kv_head, 2);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->vocab_size, 32000);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_DOUBLE_EQ(c->rope.theta, 10000.0);
  EXPECT_NEAR(c->norm_eps, 1e-5, 1e-12);
}

}  // namespace
}  // namespace fak
