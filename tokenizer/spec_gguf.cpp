#include "tokenizer/spec_gguf.h"

#include <algorithm>
#include <cctype>

#include "tokenizer/pre_split.h"  // GgufPreTokenizerFor

namespace fak {
namespace {

Result<std::vector<std::string>> ReadStrings(const GgufFile& gguf, std::string_view key) {
  FAK_ASSIGN_OR_RETURN(const GgufArray* arr, gguf.GetArray(key));
  std::vector<std::string> out;
  out.reserve(arr->values.size());
  for (size_t i = 0; i < arr->values.size(); ++i) {
    const std::string* s = arr->values[i].AsString();
    if (s == nullptr) return Corrupt("{}: {}[{}] is not a string", gguf.path(), key, i);
    out.push_back(*s);
  }
  return out;
}

// Optional integer id: -1 when absent.
Result<int32_t> ReadOptionalId(const GgufFile& gguf, std::string_view key) {
  const GgufValue* v = gguf.Find(key);
  if (v == nullptr) return -1;
  const std::optional<int64_t> id = v->AsInt();
  if (!id) return Corrupt("{}: {} is not an integer", gguf.path(), key);
  if (*id < -1 || *id > INT32_MAX) return Corrupt("{}: {} = {} is out of range", gguf.path(), key, *id);
  return static_cast<int32_t>(*id);
}

Result<bool> ReadOptionalBool(const GgufFile& gguf, std::string_view key, bool fallback) {
  const GgufValue* v = gguf.Find(key);
  if (v == nullptr) return fallback;
  const std::optional<bool> b = v->AsBool();
  if (!b) return Corrupt("{}: {} is not a bool", gguf.path(), key);
  return *b;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Result<TokenizerSpec> TokenizerSpecFromGguf(const GgufFile& gguf) {
  TokenizerSpec spec;
  spec.source = gguf.path();
  FAK_ASSIGN_OR_RETURN(const std::string model, gguf.GetString("tokenizer.ggml.model"));
  FAK_ASSIGN_OR_RETURN(spec.tokens, ReadStrings(gguf, "tokenizer.ggml.tokens"));
  const size_t n = spec.tokens.size();

  if (gguf.Find("tokenizer.ggml.token_type") != nullptr) {
    FAK_ASSIGN_OR_RETURN(const GgufArray* types, gguf.GetArray("tokenizer.ggml.token_type"));
    if (types->values.size() != n) {
      return Corrupt("{}: tokenizer.ggml.token_type has {} entries for {} tokens", spec.source,
                     types->values.size(), n);
    }
    spec.types.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const std::optional<int64_t> t = types->values[i].AsInt();
      if (!t || *t < 0 || *t > 6) {
        return Corrupt("{}: tokenizer.ggml.token_type[{}] is not a token type (0..6)", spec.source, i);
      }
      spec.types[i] = static_cast<TokenType>(*t);
    }
  }
  if (gguf.Find("tokenizer.ggml.scores") != nullptr) {
    FAK_ASSIGN_OR_RETURN(const GgufArray* scores, gguf.GetArray("tokenizer.ggml.scores"));
    if (scores->values.size() != n) {
      return Corrupt("{}: tokenizer.ggml.scores has {} entries for {} tokens", spec.source,
                     scores->values.size(), n);
    }
    spec.scores.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const std::optional<double> s = scores->values[i].AsFloat();
      if (!s) return Corrupt("{}: tokenizer.ggml.scores[{}] is not a number", spec.source, i);
      spec.scores[i] = static_cast<float>(*s);
    }
  }

  FAK_ASSIGN_OR_RETURN(spec.bos_id, ReadOptionalId(gguf, "tokenizer.ggml.bos_token_id"));
  FAK_ASSIGN_OR_RETURN(spec.eos_id, ReadOptionalId(gguf, "tokenizer.ggml.eos_token_id"));
  FAK_ASSIGN_OR_RETURN(spec.unk_id, ReadOptionalId(gguf, "tokenizer.ggml.unknown_token_id"));
  FAK_ASSIGN_OR_RETURN(spec.pad_id, ReadOptionalId(gguf, "tokenizer.ggml.padding_token_id"));

  if (model == "gpt2" || model == "gemma4") {
    spec.model = TokenizerModel::kBpe;
    FAK_ASSIGN_OR_RETURN(const std::vector<std::string> merges, ReadStrings(gguf, "tokenizer.ggml.merges"));
    spec.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const size_t sp = merges[i].find(' ', 1);
      if (sp == std::string::npos) {
        return Corrupt("{}: tokenizer.ggml.merges[{}] '{}' is not two pieces separated by a space",
                       spec.source, i, merges[i]);
      }
      spec.merges.emplace_back(merges[i].substr(0, sp), merges[i].substr(sp + 1));
    }
    // As llama.cpp: a gemma4 vocabulary is always the gemma4 pre-tokenizer; a missing name is "default".
    std::string pre = model == "gemma4" ? "gemma4" : "default";
    if (model != "gemma4" && gguf.Find("tokenizer.ggml.pre") != nullptr) {
      FAK_ASSIGN_OR_RETURN(pre, gguf.GetString("tokenizer.ggml.pre"));
    }
    auto found = GgufPreTokenizerFor(pre);
    if (!found.ok()) return found.status().WithContext(spec.source);
    GgufPreTokenizer p = std::move(found).value();
    spec.split_patterns = std::move(p.splits);
    spec.ignore_merges = p.ignore_merges;
    spec.byte_level = p.byte_level;
    // SentencePiece-style BPE (Gemma 4): spaces are U+2581, characters missing from the vocabulary
    // become <0xAB> pieces.
    spec.byte_fallback = !p.byte_level;
    spec.metaspace = p.escape_whitespace;
    FAK_ASSIGN_OR_RETURN(spec.add_bos, ReadOptionalBool(gguf, "tokenizer.ggml.add_bos_token", false));
  } else if (model == "llama") {
    spec.model = TokenizerModel::kSpm;
    spec.byte_level = false;
    spec.metaspace = true;
    spec.byte_fallback = true;
    if (spec.scores.empty()) return NotFound("{}: missing key tokenizer.ggml.scores", spec.source);
    FAK_ASSIGN_OR_RETURN(spec.add_space_prefix,
                         ReadOptionalBool(gguf, "tokenizer.ggml.add_space_prefix", true));
    FAK_ASSIGN_OR_RETURN(spec.add_bos, ReadOptionalBool(gguf, "tokenizer.ggml.add_bos_token", true));
    if (spec.unk_id < 0) spec.unk_id = 0;
  } else if (model == "bert") {
    return Unsupported(
        "{}: tokenizer.ggml.model 'bert' (WordPiece) is not supported (want gpt2, gemma4 or llama)",
        spec.source);
  } else if (model == "t5") {
    return Unsupported(
        "{}: tokenizer.ggml.model 't5' (Unigram) is not supported (want gpt2, gemma4 or llama)", spec.source);
  } else {
    return Unsupported("{}: tokenizer.ggml.model '{}' is not supported (want gpt2, gemma4 or llama)",
                       spec.source, model);
  }
  FAK_ASSIGN_OR_RETURN(spec.add_eos, ReadOptionalBool(gguf, "tokenizer.ggml.add_eos_token", false));
  if (gguf.Find("tokenizer.chat_template") != nullptr) {
    FAK_ASSIGN_OR_RETURN(spec.chat_template, gguf.GetString("tokenizer.chat_template"));
  }

  // Phi-3's added tokens swallow the whitespace after them (rstrip in its tokenizer.json), except
  // <unk>, <s> and <|endoftext|>; GGUF has no field for it, so it goes by the model name.
  std::string name;
  if (const GgufValue* v = gguf.Find("general.name"); v != nullptr && v->AsString() != nullptr) {
    name = Lower(*v->AsString());
  }
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (size_t i = 0; i < n && !spec.types.empty(); ++i) {
      const TokenType t = spec.types[i];
      if (t != TokenType::kControl && t != TokenType::kUserDefined && t != TokenType::kUnknown) continue;
      AddedToken a;
      a.id = static_cast<int32_t>(i);
      a.content = spec.tokens[i];
      a.special = t != TokenType::kUserDefined;
      a.rstrip = a.content != "<unk>" && a.content != "<s>" && a.content != "<|endoftext|>";
      if (!a.content.empty()) spec.added_tokens.push_back(std::move(a));
    }
  }
  return spec;
}

}  // namespace fak
