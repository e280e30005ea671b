#include "engine/convert/gguf_model_writer.h"

#include <atomic>
#include <filesystem>
#include <mutex>
#include <vector>

#include "quant/codec.h"          // QuantizeRow
#include "tokenizer/pre_split.h"  // PreSplitPatternsForGgufPre

namespace fak::convert {
namespace {

bool LooksSpecial(const std::string& t) { return t.size() >= 4 && t.starts_with("<|") && t.ends_with("|>"); }

}  // namespace

void SetModelMetadata(GgufWriter& w, const ModelConfig& c, std::string_view name, const FileTypeInfo& ft) {
  const bool hybrid = c.hybrid();
  // llama.cpp's names
  const std::string a = c.arch == "qwen3_5"       ? "qwen35"
                        : c.arch == "qwen3_5_moe" ? "qwen35moe"
                        : c.arch == "qwen3_next"  ? "qwen3next"
                                                  : c.arch;
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  w.SetString("general.architecture", a);
  w.SetString("general.name", std::string(name));
  w.SetUint32("general.file_type", ft.llama_ftype);
  w.SetUint32("general.quantization_version", 2);
  w.SetUint32(a + ".context_length", u32(c.max_context > 0 ? c.max_context : 4096));
  w.SetUint32(a + ".embedding_length", u32(c.d_model));
  w.SetUint32(a + ".block_count", u32(c.n_layer));
  w.SetUint32(a + ".feed_forward_length", u32(c.d_ffn));
  w.SetUint32(a + ".attention.head_count", u32(c.n_head));
  w.SetUint32(a + ".attention.head_count_kv", u32(c.n_kv_head));
  w.SetFloat32(a + ".rope.freq_base", static_cast<float>(c.rope.theta));
  w.SetFloat32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.norm_eps));
  int64_t rot = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.rope.partial_rotary_factor + 0.5);
  rot -= rot % 2;
  w.SetUint32(a + ".rope.dimension_count", u32(rot));
  if (c.head_dim * c.n_head != c.d_model) {  // readers assume d_model / n_head otherwise
    w.SetUint32(a + ".attention.key_length", u32(c.head_dim));
    w.SetUint32(a + ".attention.value_length", u32(c.head_dim));
  }
  w.SetUint32(a + ".vocab_size", u32(c.vocab_size));
  if (hybrid) {
    w.SetUint32(a + ".ssm.conv_kernel", u32(c.linear_conv_kernel));
    w.SetUint32(a + ".ssm.state_size", u32(c.linear_key_head_dim));
    w.SetUint32(a + ".ssm.group_count", u32(c.linear_n_key_head));
    w.SetUint32(a + ".ssm.time_step_rank", u32(c.linear_n_value_head));
    w.SetUint32(a + ".ssm.inner_size", u32(c.linear_n_value_head * c.linear_value_head_dim));
    auto layers = std::make_shared<GgufArray>();
    layers->element_type = GgufValueType::kBool;
    int64_t interval = 0;  // the period of the full-attention layers, when they have one
    for (size_t l = 0; l < c.layer_is_linear.size(); ++l) {
      layers->values.push_back(GgufValue{GgufValueType::kBool, c.layer_is_linear[l]});
      if (!c.layer_is_linear[l] && interval == 0) interval = static_cast<int64_t>(l) + 1;
    }
    w.SetValue(a + ".attention.recurrent_layers", GgufValue{GgufValueType::kArray, layers});
    w.SetUint32(a + ".full_attention_interval", u32(interval > 0 ? interval : c.n_layer));
  }
  if (c.n_expert > 0) {
    w.SetUint32(a + ".expert_count", u32(c.n_expert));
    w.SetUint32(a + ".expert_used_count", u32(c.n_expert_used));
    w.SetUint32(a + ".expert_feed_forward_length", u32(c.d_expert_ffn));
    if (c.d_shared_expert_ffn > 0) {
      w.SetUint32(a + ".expert_shared_feed_forward_length", u32(c.d_shared_expert_ffn));
    }
  }
  if (c.arch == "qwen3_5" || c.arch == "qwen3_5_moe") {
    // M-RoPE sections (time, height, width, extra) in rotated pairs; text positions are the same in
    // each, so only their sum matters. Qwen3.5's own split where it fits.
    const int32_t pairs = static_cast<int32_t>(rot / 2);
    std::vector<int32_t> sections = {pairs - 2 * (pairs / 3), pairs / 3, pairs / 3, 0};
    if (pairs == 32) sections = {11, 11, 10, 0};
    w.SetInt32Array(a + ".rope.dimension_sections", sections);
  }
  if (c.rope.scaling == RopeScaling::kLinear || c.rope.scaling == RopeScaling::kYarn) {
    w.SetString(a + ".rope.scaling.type", c.rope.scaling == RopeScaling::kLinear ? "linear" : "yarn");
    w.SetFloat32(a + ".rope.scaling.factor", static_cast<float>(c.rope.factor));
    if (c.rope.original_max_position > 0) {
      w.SetUint32(a + ".rope.scaling.original_context_length", u32(c.rope.original_max_position));
    }
  }
}

Result<std::string> GgufPreName(const TokenizerSpec& spec) {
  for (const char* name : {"qwen2", "qwen35", "llama-bpe", "gpt2", "falcon", "starcoder"}) {
    auto patterns = PreSplitPatternsForGgufPre(name);
    if (patterns.ok() && *patterns == spec.split_patterns) return std::string(name);
  }
  return NotFound(
      "{}: its pre-tokenizer split patterns match none of the GGUF pre-tokenizers fak knows "
      "(qwen2, qwen35, llama-bpe, gpt2, falcon, starcoder)",
      spec.source);
}

Status SetTokenizerMetadata(GgufWriter& w, const TokenizerSpec& spec, int64_t vocab_size) {
  const size_t n = static_cast<size_t>(vocab_size);
  if (spec.tokens.size() > n) {
    return InvalidArgument("{}: the tokenizer has {} tokens, more than the model's vocab_size {}",
                           spec.source, spec.tokens.size(), vocab_size);
  }
  std::vector<std::string> tokens(n);
  std::vector<int32_t> types(n, static_cast<int32_t>(TokenType::kUnused));
  for (size_t i = 0; i < n; ++i) {
    const bool present = i < spec.tokens.size() && !spec.tokens[i].empty();
    if (!present) {
      tokens[i] = "[PAD" + std::to_string(i) + "]";
      continue;
    }
    tokens[i] = spec.tokens[i];
    TokenType t = spec.types.empty() ? TokenType::kNormal : spec.types[i];
    if (t == TokenType::kUserDefined && LooksSpecial(tokens[i])) t = TokenType::kControl;
    types[i] = static_cast<int32_t>(t);
  }
  if (spec.model == TokenizerModel::kBpe) {
    if (!spec.byte_level) return Unsupported("{}: a BPE tokenizer without byte-level mapping", spec.source);
    FAK_ASSIGN_OR_RETURN(std::string pre, GgufPreName(spec));
    w.SetString("tokenizer.ggml.model", "gpt2");
    w.SetString("tokenizer.ggml.pre", pre);
  } else {
    w.SetString("tokenizer.ggml.model", "llama");
    std::vector<float> scores(n, -1e9f);
    for (size_t i = 0; i < spec.scores.size() && i < n; ++i) scores[i] = spec.scores[i];
    w.SetBool("tokenizer.ggml.add_space_prefix", spec.add_space_prefix);
    w.SetFloat32Array("tokenizer.ggml.scores", std::move(scores));
  }
  w.SetStringArray("tokenizer.ggml.tokens", std::move(tokens));
  w.SetInt32Array("tokenizer.ggml.token_type", std::move(types));
  if (spec.model == TokenizerModel::kBpe) {
    std::vector<std::string> merges;
    merges.reserve(spec.merges.size());
    for (const auto& [l, r] : spec.merges) merges.push_back(l + " " + r);
    w.SetStringArray("tokenizer.ggml.merges", std::move(merges));
  }
  auto id = [&](const char* key, int32_t v) {
    if (v >= 0) w.SetUint32(key, static_cast<uint32_t>(v));
  };
  id("tokenizer.ggml.bos_token_id", spec.bos_id);
  id("tokenizer.ggml.eos_token_id", spec.eos_id);
  id("tokenizer.ggml.unknown_token_id", spec.unk_id);
  id("tokenizer.ggml.padding_token_id", spec.pad_id);
  w.SetBool("tokenizer.ggml.add_bos_token", spec.add_bos);
  if (spec.add_eos) w.SetBool("tokenizer.ggml.add_eos_token", true);
  if (!spec.chat_template.empty()) w.SetString("tokenizer.chat_template", spec.chat_template);
  return Status::Ok();
}

GgufWriter::Producer RowProducer(ThreadPool& pool, GgmlType type, int64_t rows, int64_t cols, RowFn row_fn) {
  return [&pool, type, rows, cols, row_fn = std::move(row_fn)](std::span<uint8_t> out) -> Status {
    const auto row_bytes = GgmlRowBytes(type, static_cast<uint64_t>(cols));
    if (!row_bytes || *row_bytes * static_cast<uint64_t>(rows) != out.size()) {
      return Internal("{} rows of {} {} do not fill {} bytes", rows, cols, GgmlTypeName(type), out.size());
    }
    std::mutex mu;
    Status first = Status::Ok();
    std::atomic<bool> failed{false};
    pool.ParallelFor(rows, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = begin; r < end && !failed.load(std::memory_order_relaxed); ++r) {
        Status s = row_fn(r, row.data());
        if (s.ok()) s = QuantizeRow(type, row.data(), out.data() + static_cast<size_t>(r) * *row_bytes, cols);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (first.ok()) first = std::move(s);
          failed.store(true);
        }
      }
    });
    return first;
  };
}

}  // namespace fak::convert

namespace fak::convert {

Status CheckOutputPath(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return InvalidArgument("no output path given");
  std::error_code ec;
  if (fs::is_directory(path, ec)) return InvalidArgument("output {} is a folder; give a file name", path);
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    return InvalidArgument("output {}: folder {} does not exist", path, parent.string());
  }
  return Status::Ok();
}

}  // namespace fak::convert
