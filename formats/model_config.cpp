#include "formats/model_config.h"

#include <algorithm>
#include <cmath>

#include <filesystem>

#include <nlohmann/json.hpp>

namespace fak {
namespace {

using json = nlohmann::json;

// Field readers that name the field and the file in their errors.
class JsonFields {
 public:
  JsonFields(const json& j, const std::string& source) : j_(j), source_(source) {}

  Result<int64_t> Int(const char* key) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return NotFound("{}: missing field '{}'", source_, key);
    if (!it->is_number_integer()) return Corrupt("{}: field '{}' is not an integer", source_, key);
    return it->get<int64_t>();
  }
  Result<int64_t> IntOr(const char* key, int64_t def) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return def;
    return Int(key);
  }
  Result<double> NumberOr(const char* key, double def) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return def;
    if (!it->is_number()) return Corrupt("{}: field '{}' is not a number", source_, key);
    return it->get<double>();
  }
  Result<bool> BoolOr(const char* key, bool def) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return def;
    if (!it->is_boolean()) return Corrupt("{}: field '{}' is not a boolean", source_, key);
    return it->get<bool>();
  }
  std::string StringOr(const char* key, const std::string& def) const {
    auto it = j_.find(key);
    return (it != j_.end() && it->is_string()) ? it->get<std::string>() : def;
  }

 private:
  const json& j_;
  const std::string& source_;
};

Status ParseRopeScaling(const json& rs, const std::string& source, RopeConfig& rope) {
  if (rs.is_null()) return Status::Ok();
  if (!rs.is_object()) return Corrupt("{}: field 'rope_scaling' is not an object", source);
  JsonFields f(rs, source);
  std::string type = f.StringOr("rope_type", f.StringOr("type", ""));
  FAK_ASSIGN_OR_RETURN(rope.factor, f.NumberOr("factor", 1.0));
  FAK_ASSIGN_OR_RETURN(rope.original_max_position, f.IntOr("original_max_position_embeddings", 0));
  if (type == "linear") {
    rope.scaling = RopeScaling::kLinear;
  } else if (type == "llama3") {
    rope.scaling = RopeScaling::kLlama3;
    FAK_ASSIGN_OR_RETURN(rope.low_freq_factor, f.NumberOr("low_freq_factor", 1.0));
    FAK_ASSIGN_OR_RETURN(rope.high_freq_factor, f.NumberOr("high_freq_factor", 4.0));
  } else if (type == "yarn") {
    rope.scaling = RopeScaling::kYarn;
    FAK_ASSIGN_OR_RETURN(rope.beta_fast, f.NumberOr("beta_fast", 32.0));
    FAK_ASSIGN_OR_RETURN(rope.beta_slow, f.NumberOr("beta_slow", 1.0));
    FAK_ASSIGN_OR_RETURN(rope.attn_factor, f.NumberOr("attention_factor", 1.0));
  } else if (type == "default" || type.empty()) {
    rope.scaling = RopeScaling::kNone;
  } else {
    return Unsupported("{}: rope_scaling type '{}' (fak knows linear, llama3, yarn)", source, type);
  }
  if (rope.factor <= 0) return Corrupt("{}: rope_scaling.factor must be positive", source);
  return Status::Ok();
}

}  // namespace

const char* RopeScalingName(RopeScaling s) {
  switch (s) {
    case RopeScaling::kNone: return "none";
    case RopeScaling::kLinear: return "linear";
    case RopeScaling::kLlama3: return "llama3";
    case RopeScaling::kYarn: return "yarn";
  }
  return "?";
}

Status ModelConfig::Validate() const {
  auto positive = [](const char* field, int64_t v) -> Status {
    if (v <= 0) return Corrupt("model config: {} = {} must be positive", field, v);
    return Status::Ok();
  };
  FAK_RETURN_IF_ERROR(positive("n_layer", n_layer));
  FAK_RETURN_IF_ERROR(positive("d_model", d_model));
  FAK_RETURN_IF_ERROR(positive("d_ffn", d_ffn));
  FAK_RETURN_IF_ERROR(positive("n_head", n_head));
  FAK_RETURN_IF_ERROR(positive("n_kv_head", n_kv_head));
  FAK_RETURN_IF_ERROR(positive("head_dim", head_dim));
  FAK_RETURN_IF_ERROR(positive("vocab_size", vocab_size));
  if (n_head % n_kv_head != 0) {
    return Corrupt("model config: n_head {} is not a multiple of n_kv_head {}", n_head, n_kv_head);
  }
  if (!layer_is_linear.empty() && static_cast<int64_t>(layer_is_linear.size()) != n_layer) {
    return Corrupt("model config: {} layer types for {} layers", layer_is_linear.size(), n_layer);
  }
  if (hybrid()) {
    if (layer_is_linear.empty()) return Corrupt("model config: the hybrid model names no layer types");
    FAK_RETURN_IF_ERROR(positive("linear_num_key_heads", linear_n_key_head));
    FAK_RETURN_IF_ERROR(positive("linear_num_value_heads", linear_n_value_head));
    FAK_RETURN_IF_ERROR(positive("linear_key_head_dim", linear_key_head_dim));
    FAK_RETURN_IF_ERROR(positive("linear_value_head_dim", linear_value_head_dim));
    if (linear_n_value_head % linear_n_key_head != 0) {
      return Corrupt("model config: linear_num_value_heads {} is not a multiple of linear_num_key_heads {}",
                     linear_n_value_head, linear_n_key_head);
    }
    if (linear_conv_kernel < 1 || linear_conv_kernel > 16) {
      return Corrupt("model config: linear_conv_kernel_dim = {} (want 1 to 16)", linear_conv_kernel);
    }
    if (linear_n_value_head > 4096 || linear_key_head_dim > 4096 || linear_value_head_dim > 4096) {
      return Corrupt("model config: implausible linear-attention size ({} heads of {} x {})",
                     linear_n_value_head, linear_key_head_dim, linear_value_head_dim);
    }
  }
  if (n_expert > 0 || !layer_is_moe.empty()) {
    if (!layer_is_moe.empty() && static_cast<int64_t>(layer_is_moe.size()) != n_layer) {
      return Corrupt("model config: {} expert-layer flags for {} layers", layer_is_moe.size(), n_layer);
    }
    FAK_RETURN_IF_ERROR(positive("num_experts", n_expert));
    FAK_RETURN_IF_ERROR(positive("num_experts_per_tok", n_expert_used));
    FAK_RETURN_IF_ERROR(positive("moe_intermediate_size", d_expert_ffn));
    if (n_expert > 4096 || n_expert_used > n_expert) {
      return Corrupt("model config: {} experts per token of {} (want 1 to num_experts, at most 4096 experts)",
                     n_expert_used, n_expert);
    }
    if (d_shared_expert_ffn < 0) {
      return Corrupt("model config: shared_expert_intermediate_size = {} is negative", d_shared_expert_ffn);
    }
  }
  // Scalars that would otherwise run silently to non-finite activations (token 0 forever).
  auto finite_positive = [](const char* field, double v) -> Status {
    if (!std::isfinite(v) || v <= 0)
      return Corrupt("model config: {} = {} must be a finite number above 0", field, v);
    return Status::Ok();
  };
  FAK_RETURN_IF_ERROR(finite_positive("rms_norm_eps", norm_eps));
  FAK_RETURN_IF_ERROR(finite_positive("rope_theta", rope.theta));
  FAK_RETURN_IF_ERROR(finite_positive("rope scaling factor", rope.factor));
  FAK_RETURN_IF_ERROR(finite_positive("rope attention factor", rope.attn_factor));
  if (!(rope.partial_rotary_factor > 0 && rope.partial_rotary_factor <= 1)) {
    return Corrupt("model config: partial_rotary_factor = {} must be in (0, 1]", rope.partial_rotary_factor);
  }
  if (n_layer > 4096 || d_model > (1 << 20) || n_head > 4096 || vocab_size > (1 << 24)) {
    return Corrupt("model config: implausible size (n_layer {}, d_model {}, n_head {}, vocab {})", n_layer,
                   d_model, n_head, vocab_size);
  }
  return Status::Ok();
}

Result<ModelConfig> ModelConfigFromHfJson(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Corrupt("{}: not a JSON object", source);
  // Multimodal wrappers (Qwen3.5) keep the language model's fields under text_config.
  if (auto tc = j.find("text_config"); tc != j.end() && tc->is_object() && !j.contains("hidden_size")) {
    json inner = *tc;
    if (!inner.contains("architectures") && j.contains("architectures"))
      inner["architectures"] = j["architectures"];
    j = std::move(inner);
  }
  JsonFields f(j, source);
  ModelConfig c;
  const std::string model_type = f.StringOr("model_type", "");
  if (auto a = j.find("architectures"); a != j.end() && a->is_array() && !a->empty() && (*a)[0].is_string()) {
    c.hf_architecture = (*a)[0].get<std::string>();
  }
  if (model_type == "llama" || model_type == "mistral") {
    c.arch = "llama";
  } else if (model_type == "qwen2") {
    c.arch = "qwen2";
  } else if (model_type == "qwen3") {
    c.arch = "qwen3";
  } else if (model_type == "qwen3_5" || model_type == "qwen3_5_text") {
    c.arch = "qwen3_5";
  } else if (model_type == "qwen3_5_moe" || model_type == "qwen3_5_moe_text") {
    c.arch = "qwen3_5_moe";
  } else if (model_type == "qwen3_next") {
    c.arch = "qwen3_next";
  } else {
    return Unsupported(
        "{}: model_type '{}' (architecture '{}') is not supported; fak runs llama, qwen2, qwen3, qwen3_5, "
        "qwen3_5_moe, qwen3_next",
        source, model_type, c.hf_architecture);
  }
  FAK_ASSIGN_OR_RETURN(c.n_layer, f.Int("num_hidden_layers"));
  FAK_ASSIGN_OR_RETURN(c.d_model, f.Int("hidden_size"));
  // Qwen3.5-MoE has experts in every layer and no dense FFN width.
  if (c.arch == "qwen3_5_moe") {
    FAK_ASSIGN_OR_RETURN(const int64_t expert_ffn, f.IntOr("moe_intermediate_size", 0));
    FAK_ASSIGN_OR_RETURN(c.d_ffn, f.IntOr("intermediate_size", expert_ffn));
  } else {
    FAK_ASSIGN_OR_RETURN(c.d_ffn, f.Int("intermediate_size"));
  }
  FAK_ASSIGN_OR_RETURN(c.n_head, f.Int("num_attention_heads"));
  FAK_ASSIGN_OR_RETURN(c.n_kv_head, f.IntOr("num_key_value_heads", c.n_head));
  FAK_ASSIGN_OR_RETURN(c.vocab_size, f.Int("vocab_size"));
  FAK_ASSIGN_OR_RETURN(c.max_context, f.IntOr("max_position_embeddings", 0));
  FAK_ASSIGN_OR_RETURN(c.norm_eps, f.NumberOr("rms_norm_eps", 1e-6));
  FAK_ASSIGN_OR_RETURN(c.rope.theta, f.NumberOr("rope_theta", 10000.0));
  FAK_ASSIGN_OR_RETURN(c.rope.partial_rotary_factor, f.NumberOr("partial_rotary_factor", 1.0));
  FAK_ASSIGN_OR_RETURN(c.tied_embeddings, f.BoolOr("tie_word_embeddings", false));
  FAK_ASSIGN_OR_RETURN(const bool tie_unless_stated, f.BoolOr("tie_word_embeddings", true));
  c.untied_stated = !tie_unless_stated;
  FAK_ASSIGN_OR_RETURN(c.qkv_bias, f.BoolOr("attention_bias", c.arch == "qwen2"));
  if (c.n_head > 0) {
    FAK_ASSIGN_OR_RETURN(c.head_dim, f.IntOr("head_dim", c.d_model / c.n_head));
  }
  c.qk_norm = c.arch == "qwen3" || c.hybrid();
  c.torch_dtype = f.StringOr("torch_dtype", f.StringOr("dtype", ""));
  if (auto rs = j.find("rope_scaling"); rs != j.end())
    FAK_RETURN_IF_ERROR(ParseRopeScaling(*rs, source, c.rope));
  // transformers 5 writes theta and scaling together as "rope_parameters".
  if (auto rp = j.find("rope_parameters"); rp != j.end() && !rp->is_null()) {
    if (!rp->is_object()) return Corrupt("{}: field 'rope_parameters' is not an object", source);
    JsonFields pf(*rp, source);
    FAK_ASSIGN_OR_RETURN(c.rope.theta, pf.NumberOr("rope_theta", c.rope.theta));
    FAK_ASSIGN_OR_RETURN(c.rope.partial_rotary_factor,
                         pf.NumberOr("partial_rotary_factor", c.rope.partial_rotary_factor));
    FAK_RETURN_IF_ERROR(ParseRopeScaling(*rp, source, c.rope));
  }
  FAK_ASSIGN_OR_RETURN(c.bos_token_id, f.IntOr("bos_token_id", -1));
  if (auto e = j.find("eos_token_id"); e != j.end()) {
    if (e->is_number_integer()) {
      c.eos_token_ids.push_back(e->get<int64_t>());
    } else if (e->is_array()) {
      for (const auto& x : *e) {
        if (!x.is_number_integer()) return Corrupt("{}: field 'eos_token_id' holds a non-integer", source);
        c.eos_token_ids.push_back(x.get<int64_t>());
      }
    } else if (!e->is_null()) {
      return Corrupt("{}: field 'eos_token_id' is neither an integer nor a list", source);
    }
  }
  if (c.hybrid()) {
    auto lt = j.find("layer_types");
    if (lt == j.end() || lt->is_null()) {
      // Qwen3-Next's config may give only the period of the full-attention layers.
      FAK_ASSIGN_OR_RETURN(int64_t interval, f.IntOr("full_attention_interval", 0));
      if (interval <= 0) return NotFound("{}: missing list 'layer_types' for the hybrid model", source);
      for (int64_t l = 0; l < c.n_layer && l < (int64_t{1} << 20); ++l) {
        c.layer_is_linear.push_back((l + 1) % interval != 0);
      }
    } else if (!lt->is_array()) {
      return Corrupt("{}: 'layer_types' is not a list", source);
    }
    for (const auto& t : lt != j.end() && lt->is_array() ? *lt : json::array()) {
      if (!t.is_string()) return Corrupt("{}: 'layer_types' holds a non-string", source);
      const std::string s = t.get<std::string>();
      if (s != "linear_attention" && s != "full_attention") {
        return Corrupt("{}: layer type '{}' (want linear_attention or full_attention)", source, s);
      }
      c.layer_is_linear.push_back(s == "linear_attention");
    }
    FAK_ASSIGN_OR_RETURN(c.linear_n_key_head, f.Int("linear_num_key_heads"));
    FAK_ASSIGN_OR_RETURN(c.linear_n_value_head, f.Int("linear_num_value_heads"));
    FAK_ASSIGN_OR_RETURN(c.linear_key_head_dim, f.Int("linear_key_head_dim"));
    FAK_ASSIGN_OR_RETURN(c.linear_value_head_dim, f.Int("linear_value_head_dim"));
    FAK_ASSIGN_OR_RETURN(c.linear_conv_kernel, f.IntOr("linear_conv_kernel_dim", 4));
  }
  FAK_ASSIGN_OR_RETURN(c.n_expert, f.IntOr("num_experts", 0));
  if (c.n_expert > 0) {
    FAK_ASSIGN_OR_RETURN(c.n_expert_used, f.Int("num_experts_per_tok"));
    FAK_ASSIGN_OR_RETURN(c.d_expert_ffn, f.Int("moe_intermediate_size"));
    // transformers' default for both families when the field is left out.
    FAK_ASSIGN_OR_RETURN(c.d_shared_expert_ffn, f.IntOr("shared_expert_intermediate_size", 512));
    FAK_ASSIGN_OR_RETURN(c.norm_top_k, f.BoolOr("norm_topk_prob", true));
    FAK_ASSIGN_OR_RETURN(int64_t step, f.IntOr("decoder_sparse_step", 1));
    if (step <= 0) return Corrupt("{}: decoder_sparse_step = {} must be positive", source, step);
    std::vector<int64_t> dense;
    if (auto m = j.find("mlp_only_layers"); m != j.end() && !m->is_null()) {
      if (!m->is_array()) return Corrupt("{}: 'mlp_only_layers' is not a list", source);
      for (const auto& x : *m) {
        if (!x.is_number_integer()) return Corrupt("{}: 'mlp_only_layers' holds a non-integer", source);
        dense.push_back(x.get<int64_t>());
      }
    }
    for (int64_t l = 0; l < c.n_layer && l < (int64_t{1} << 20); ++l) {
      const bool only_mlp = std::find(dense.begin(), dense.end(), l) != dense.end();
      c.layer_is_moe.push_back(!only_mlp && (l + 1) % step == 0);
    }
  }
  Status v = c.Validate();
  if (!v.ok()) return v.WithContext(source);
  return c;
}

Result<ModelConfig> ModelConfigFromHfDir(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  FAK_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ModelConfigFromHfJson(text, path);
}

namespace {

// llama.cpp's qwen35 keys: the Gated-DeltaNet geometry under ssm.*, which layers are recurrent,
// and the rotated part of each head.
Status HybridFromGguf(const GgufFile& file, const std::string& arch, ModelConfig& c) {
  auto get = [&](const char* k) -> Result<int64_t> {
    FAK_ASSIGN_OR_RETURN(uint64_t v, file.GetUint(arch + "." + k));
    if (v > (uint64_t{1} << 31)) return Corrupt("{}: {}.{} = {} is too large", file.path(), arch, k, v);
    return static_cast<int64_t>(v);
  };
  // Multi-token-prediction blocks follow the trunk's layers; fak runs the trunk only.
  if (file.Find(arch + ".nextn_predict_layers") != nullptr) {
    FAK_ASSIGN_OR_RETURN(int64_t nextn, get("nextn_predict_layers"));
    if (nextn >= c.n_layer) return Corrupt("{}: {} prediction layers of {}", file.path(), nextn, c.n_layer);
    c.n_layer -= nextn;
  }
  FAK_ASSIGN_OR_RETURN(c.linear_conv_kernel, get("ssm.conv_kernel"));
  FAK_ASSIGN_OR_RETURN(c.linear_key_head_dim, get("ssm.state_size"));
  FAK_ASSIGN_OR_RETURN(c.linear_n_key_head, get("ssm.group_count"));
  FAK_ASSIGN_OR_RETURN(c.linear_n_value_head, get("ssm.time_step_rank"));
  FAK_ASSIGN_OR_RETURN(int64_t inner, get("ssm.inner_size"));
  if (c.linear_n_value_head <= 0 || inner % c.linear_n_value_head != 0) {
    return Corrupt("{}: {}.ssm.inner_size {} is not a multiple of ssm.time_step_rank {}", file.path(), arch,
                   inner, c.linear_n_value_head);
  }
  c.linear_value_head_dim = inner / c.linear_n_value_head;
  c.layer_is_linear.clear();
  if (const GgufValue* v = file.Find(arch + ".attention.recurrent_layers")) {
    const GgufArray* a = v->AsArray();
    if (a == nullptr) return Corrupt("{}: {}.attention.recurrent_layers is not an array", file.path(), arch);
    for (const GgufValue& e : a->values) {
      std::optional<bool> b = e.AsBool();
      if (!b) return Corrupt("{}: {}.attention.recurrent_layers holds a non-boolean", file.path(), arch);
      if (static_cast<int64_t>(c.layer_is_linear.size()) < c.n_layer) c.layer_is_linear.push_back(*b);
    }
  } else {
    int64_t interval = 4;
    if (file.Find(arch + ".full_attention_interval") != nullptr) {
      FAK_ASSIGN_OR_RETURN(interval, get("full_attention_interval"));
    }
    if (interval <= 0) return Corrupt("{}: {}.full_attention_interval is 0", file.path(), arch);
    for (int64_t l = 0; l < c.n_layer; ++l) c.layer_is_linear.push_back((l + 1) % interval != 0);
  }
  if (file.Find(arch + ".rope.dimension_count") != nullptr && c.head_dim > 0) {
    FAK_ASSIGN_OR_RETURN(int64_t rot, get("rope.dimension_count"));
    c.rope.partial_rotary_factor = static_cast<double>(rot) / static_cast<double>(c.head_dim);
  }
  // Experts (qwen3next, qwen35moe): which layers have them the tensors tell (the architecture's config hook).
  if (file.Find(arch + ".expert_count") != nullptr) {
    FAK_ASSIGN_OR_RETURN(c.n_expert, get("expert_count"));
    FAK_ASSIGN_OR_RETURN(c.n_expert_used, get("expert_used_count"));
    FAK_ASSIGN_OR_RETURN(c.d_expert_ffn, get("expert_feed_forward_length"));
    if (file.Find(arch + ".expert_shared_feed_forward_length") != nullptr) {
      FAK_ASSIGN_OR_RETURN(c.d_shared_expert_ffn, get("expert_shared_feed_forward_length"));
    }
    c.norm_top_k =
        true;  // llama.cpp's qwen3next and qwen35moe always renormalise the chosen experts' weights
    if (c.d_ffn == 0) c.d_ffn = c.d_expert_ffn;
  }
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ModelConfigFromGguf(const GgufFile& file) {
  FAK_ASSIGN_OR_RETURN(std::string arch, file.GetString("general.architecture"));
  ModelConfig c;
  if (arch == "llama" || arch == "qwen2" || arch == "qwen3") {
    c.arch = arch;
  } else if (arch == "qwen35") {
    c.arch = "qwen3_5";
  } else if (arch == "qwen35moe") {
    c.arch = "qwen3_5_moe";
  } else if (arch == "qwen3next") {
    c.arch = "qwen3_next";
  } else {
    return Unsupported(
        "{}: general.architecture '{}' is not supported; fak runs llama, qwen2, qwen3, qwen35, qwen35moe, "
        "qwen3next",
        file.path(), arch);
  }
  auto key = [&](const char* k) { return arch + "." + k; };
  auto get_int = [&](const char* k) -> Result<int64_t> {
    FAK_ASSIGN_OR_RETURN(uint64_t v, file.GetUint(key(k)));
    if (v > static_cast<uint64_t>(INT64_MAX))
      return Corrupt("{}: {} = {} is too large", file.path(), key(k), v);
    return static_cast<int64_t>(v);
  };
  auto get_int_or = [&](const char* k, int64_t def) -> Result<int64_t> {
    if (file.Find(key(k)) == nullptr) return def;
    return get_int(k);
  };
  FAK_ASSIGN_OR_RETURN(c.n_layer, get_int("block_count"));
  FAK_ASSIGN_OR_RETURN(c.d_model, get_int("embedding_length"));
  // Expert models may state only the experts' width (expert_feed_forward_length, read below).
  FAK_ASSIGN_OR_RETURN(c.d_ffn, get_int_or("feed_forward_length", 0));
  FAK_ASSIGN_OR_RETURN(c.n_head, get_int("attention.head_count"));
  FAK_ASSIGN_OR_RETURN(c.n_kv_head, get_int_or("attention.head_count_kv", c.n_head));
  FAK_ASSIGN_OR_RETURN(c.head_dim,
                       get_int_or("attention.key_length", c.n_head > 0 ? c.d_model / c.n_head : 0));
  FAK_ASSIGN_OR_RETURN(c.max_context, get_int_or("context_length", 0));
  if (file.Find(key("attention.layer_norm_rms_epsilon")) != nullptr) {
    FAK_ASSIGN_OR_RETURN(c.norm_eps, file.GetFloat(key("attention.layer_norm_rms_epsilon")));
  }
  if (file.Find(key("rope.freq_base")) != nullptr) {
    FAK_ASSIGN_OR_RETURN(c.rope.theta, file.GetFloat(key("rope.freq_base")));
  }
  if (file.Find(key("rope.scaling.type")) != nullptr) {
    FAK_ASSIGN_OR_RETURN(std::string t, file.GetString(key("rope.scaling.type")));
    if (t == "linear")
      c.rope.scaling = RopeScaling::kLinear;
    else if (t == "yarn")
      c.rope.scaling = RopeScaling::kYarn;
    else if (t != "none")
      return Unsupported("{}: {} '{}'", file.path(), key("rope.scaling.type"), t);
    if (file.Find(key("rope.scaling.factor")) != nullptr) {
      FAK_ASSIGN_OR_RETURN(c.rope.factor, file.GetFloat(key("rope.scaling.factor")));
    }
    FAK_ASSIGN_OR_RETURN(c.rope.original_max_position, get_int_or("rope.scaling.original_context_length", 0));
  }
  // Llama-3 style scaling is stored as a precomputed rope_freqs tensor in GGUF.
  if (file.FindTensor("rope_freqs.weight") != nullptr) c.rope.scaling = RopeScaling::kLlama3;
  if (file.Find(key("vocab_size")) != nullptr) {
    FAK_ASSIGN_OR_RETURN(c.vocab_size, get_int("vocab_size"));
  } else if (file.Find("tokenizer.ggml.tokens") != nullptr) {
    FAK_ASSIGN_OR_RETURN(const GgufArray* toks, file.GetArray("tokenizer.ggml.tokens"));
    c.vocab_size = static_cast<int64_t>(toks->values.size());
  } else if (const GgufTensorInfo* emb = file.FindTensor("token_embd.weight");
             emb && emb->shape.size() == 2) {
    c.vocab_size = static_cast<int64_t>(emb->shape[1]);
  }
  c.tied_embeddings = file.FindTensor("output.weight") == nullptr;
  // What only the tensors tell (q/k/v biases, q/k norms) the architecture's config hook reads
  // (engine/arch), where its tensor names live.
  if (file.Find("tokenizer.ggml.bos_token_id") != nullptr) {
    FAK_ASSIGN_OR_RETURN(uint64_t b, file.GetUint("tokenizer.ggml.bos_token_id"));
    c.bos_token_id = static_cast<int64_t>(b);
  }
  if (file.Find("tokenizer.ggml.eos_token_id") != nullptr) {
    FAK_ASSIGN_OR_RETURN(uint64_t e, file.GetUint("tokenizer.ggml.eos_token_id"));
    c.eos_token_ids.push_back(static_cast<int64_t>(e));
  }
  if (c.hybrid()) FAK_RETURN_IF_ERROR(HybridFromGguf(file, arch, c));
  Status v = c.Validate();
  if (!v.ok()) return v.WithContext(file.path());
  return c;
}

}  // namespace fak
