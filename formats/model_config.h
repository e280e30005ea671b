// ModelConfig: an architecture's hyper-parameters, filled from a HuggingFace config.json or from
// GGUF metadata. Plain data; engine/arch files read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/gguf.h"

namespace fak {

enum class RopeScaling { kNone, kLinear, kLlama3, kYarn };
const char* RopeScalingName(RopeScaling s);

struct RopeConfig {
  double theta = 10000.0;
  RopeScaling scaling = RopeScaling::kNone;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 0;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attn_factor = 1.0;
  double partial_rotary_factor = 1.0;  // fraction of head_dim that is rotated
};

struct ModelConfig {
  // fak's name: "llama", "qwen2", "qwen3", or a hybrid: "qwen3_5", "qwen3_5_moe", "qwen3_next"
  std::string arch;
  std::string hf_architecture;  // "Qwen2ForCausalLM" when from config.json
  int64_t n_layer = 0;
  int64_t d_model = 0;  // hidden_size
  int64_t d_ffn = 0;    // intermediate_size
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_context = 0;
  double norm_eps = 1e-6;
  RopeConfig rope;
  bool tied_embeddings = false;
  bool untied_stated = false;  // config.json says tie_word_embeddings: false (an output matrix must exist)
  bool qkv_bias = false;       // Qwen2
  bool qk_norm = false;        // Qwen3
  std::string torch_dtype;     // "bfloat16", "float16", "float32" when declared
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;

  // Gated-DeltaNet hybrid (Qwen3.5-style): which layers are linear attention, and their geometry.
  std::vector<bool> layer_is_linear;  // empty: every layer is full attention
  int64_t linear_n_key_head = 0;
  int64_t linear_n_value_head = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel = 0;

  // Mixture-of-experts FFNs (Qwen3-Next, Qwen3.5-MoE): in the layers layer_is_moe marks, a router picks
  // n_expert_used of n_expert SwiGLU experts of width d_expert_ffn per token (softmax, then the top
  // weights renormalised when norm_top_k); a shared expert of width d_shared_expert_ffn (0: none)
  // gated by sigmoid(x . w) runs beside them. Other layers keep the dense FFN of width d_ffn.
  std::vector<bool> layer_is_moe;  // empty: every layer is dense
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t d_expert_ffn = 0;
  int64_t d_shared_expert_ffn = 0;
  bool norm_top_k = true;

  bool hybrid() const { return arch == "qwen3_5" || arch == "qwen3_5_moe" || arch == "qwen3_next"; }
  bool moe_layer(int64_t l) const {
    return l >= 0 && static_cast<size_t>(l) < layer_is_moe.size() && layer_is_moe[static_cast<size_t>(l)];
  }

  // Checks internal consistency (heads divide, dims positive); names the offending field.
  Status Validate() const;
};

// From the text of a HuggingFace config.json. `source` names it in errors.
Result<ModelConfig> ModelConfigFromHfJson(const std::string& text, const std::string& source);
Result<ModelConfig> ModelConfigFromHfDir(const std::string& dir);  // reads DIR/config.json
// From GGUF metadata ("general.architecture" and "<arch>.*" keys).
Result<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace fak
