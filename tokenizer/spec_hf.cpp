#include "tokenizer/spec_hf.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "tokenizer/normalizer.h"  // NormalizerStep, EscapeRegex
#include "tokenizer/pre_split.h"   // kGpt2SplitPattern, SplitRule
#include "tokenizer/unicode.h"     // kMetaspace

namespace fak {
namespace {

using nlohmann::json;

bool GetBool(const json& j, const char* key, bool fallback) {
  const auto it = j.find(key);
  return (it != j.end() && it->is_boolean()) ? it->get<bool>() : fallback;
}

// "content" of an AddedToken-like value: a plain string or {"content": "..."}.
std::string TokenContent(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object()) {
    const auto it = j.find("content");
    if (it != j.end() && it->is_string()) return it->get<std::string>();
  }
  return std::string();
}

struct Parser {
  const std::string& source;
  TokenizerSpec& spec;
  int steps_seen = 0;             // pre-tokenizer steps parsed so far
  bool after_byte_level = false;  // a ByteLevel step came before: later splits see mapped text

  Status ParseModel(const json& model) {
    const auto type = model.find("type");
    if (type != model.end() && !(type->is_string() && type->get<std::string>() == "BPE")) {
      return Unsupported(
          "{}: model.type {} is not supported (fak implements BPE; not WordPiece, Unigram or "
          "WordLevel)",
          source, type->dump());
    }
    const auto vocab = model.find("vocab");
    if (vocab == model.end()) return NotFound("{}: missing field model.vocab", source);
    if (!vocab->is_object()) return Corrupt("{}: model.vocab is not an object", source);
    size_t size = 0;
    for (const auto& [piece, id] : vocab->items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (1 << 24)) {
        return Corrupt("{}: model.vocab['{}'] is not a token id", source, piece);
      }
      size = std::max(size, static_cast<size_t>(id.get<int64_t>()) + 1);
    }
    spec.tokens.assign(size, std::string());
    spec.types.assign(size, TokenType::kUnused);
    for (const auto& [piece, id] : vocab->items()) {
      const auto i = static_cast<size_t>(id.get<int64_t>());
      spec.tokens[i] = piece;
      spec.types[i] = TokenType::kNormal;
    }
    const auto merges = model.find("merges");
    if (merges == model.end()) return NotFound("{}: missing field model.merges", source);
    if (!merges->is_array()) return Corrupt("{}: model.merges is not an array", source);
    spec.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const json& m = (*merges)[i];
      if (m.is_string()) {
        const std::string& s = m.get_ref<const std::string&>();
        const size_t sp = s.find(' ', 1);
        if (sp == std::string::npos) {
          return Corrupt("{}: model.merges[{}] '{}' is not two pieces separated by a space", source, i, s);
        }
        spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        return Corrupt("{}: model.merges[{}] is neither \"a b\" nor [\"a\", \"b\"]", source, i);
      }
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const auto it = model.find(key);
      if (it != model.end() && it->is_string() && !it->get<std::string>().empty()) {
        return Unsupported("{}: model.{} is not supported", source, key);
      }
    }
    spec.byte_fallback = GetBool(model, "byte_fallback", false);
    spec.ignore_merges = GetBool(model, "ignore_merges", false);
    const auto unk = model.find("unk_token");
    if (unk != model.end() && unk->is_string()) {
      const auto it = vocab->find(unk->get<std::string>());
      if (it != vocab->end()) spec.unk_id = static_cast<int32_t>(it->get<int64_t>());
    }
    return Status::Ok();
  }

  Status ParseAddedTokens(const json& added) {
    if (added.is_null()) return Status::Ok();
    if (!added.is_array()) return Corrupt("{}: added_tokens is not an array", source);
    for (size_t i = 0; i < added.size(); ++i) {
      const json& a = added[i];
      if (!a.is_object()) return Corrupt("{}: added_tokens[{}] is not an object", source, i);
      const auto id = a.find("id");
      const auto content = a.find("content");
      if (id == a.end() || !id->is_number_integer() || id->get<int64_t>() < 0 ||
          id->get<int64_t>() >= (1 << 24)) {
        return Corrupt("{}: added_tokens[{}].id is missing or not a token id", source, i);
      }
      if (content == a.end() || !content->is_string() || content->get<std::string>().empty()) {
        return Corrupt("{}: added_tokens[{}].content is missing or empty", source, i);
      }
      AddedToken t;
      t.id = static_cast<int32_t>(id->get<int64_t>());
      t.content = content->get<std::string>();
      t.special = GetBool(a, "special", false);
      t.lstrip = GetBool(a, "lstrip", false);
      t.rstrip = GetBool(a, "rstrip", false);
      t.single_word = GetBool(a, "single_word", false);
      const auto n = static_cast<size_t>(t.id) + 1;
      if (spec.tokens.size() < n) {
        spec.tokens.resize(n);
        spec.types.resize(n, TokenType::kUnused);
      }
      spec.tokens[t.id] = t.content;
      spec.types[t.id] = t.special ? TokenType::kControl : TokenType::kUserDefined;
      spec.added_tokens.push_back(std::move(t));
    }
    return Status::Ok();
  }

  // Regex of a HuggingFace pattern: {"String": "..."} (literal) or {"Regex": "..."}.
  Result<std::string> PatternOf(const json& p, const std::string& where) const {
    const auto pattern = p.find("pattern");
    if (pattern == p.end() || !pattern->is_object())
      return Corrupt("{}: {}.pattern is missing", source, where);
    const auto regex = pattern->find("Regex");
    if (regex != pattern->end() && regex->is_string()) return regex->get<std::string>();
    const auto str = pattern->find("String");
    if (str != pattern->end() && str->is_string()) return EscapeRegex(str->get<std::string>());
    return Corrupt("{}: {}.pattern has neither Regex nor String", source, where);
  }

  Status ParseNormalizer(const json& n, const std::string& where) {
    if (n.is_null()) return Status::Ok();
    if (!n.is_object()) return Corrupt("{}: {} is not an object", source, where);
    const std::string type = n.value("type", "");
    NormalizerStep step;
    if (type == "Sequence") {
      const auto list = n.find("normalizers");
      if (list == n.end() || !list->is_array())
        return Corrupt("{}: {}.normalizers is not an array", source, where);
      for (size_t i = 0; i < list->size(); ++i) {
        FAK_RETURN_IF_ERROR(ParseNormalizer((*list)[i], fmt::format("{}.normalizers[{}]", where, i)));
      }
      return Status::Ok();
    }
    if (type == "NFC" || type == "NFKC" || type == "NFD" || type == "NFKD") {
      step.kind = NormalizerStep::Kind::kUnicode;
      step.form = type == "NFC"    ? NormalizationForm::kNfc
                  : type == "NFKC" ? NormalizationForm::kNfkc
                  : type == "NFD"  ? NormalizationForm::kNfd
                                   : NormalizationForm::kNfkd;
    } else if (type == "Lowercase") {
      step.kind = NormalizerStep::Kind::kLowercase;
    } else if (type == "StripAccents") {
      step.kind = NormalizerStep::Kind::kStripAccents;
    } else if (type == "Strip") {
      step.kind = NormalizerStep::Kind::kStrip;
      step.left = GetBool(n, "strip_left", true);
      step.right = GetBool(n, "strip_right", true);
    } else if (type == "Replace") {
      step.kind = NormalizerStep::Kind::kReplace;
      FAK_ASSIGN_OR_RETURN(step.pattern, PatternOf(n, where));
      step.content = n.value("content", "");
    } else if (type == "Prepend") {
      step.kind = NormalizerStep::Kind::kPrepend;
      step.content = n.value("prepend", "");
    } else {
      return Unsupported(
          "{}: {} of type '{}' is not supported (fak knows Sequence, NFC, NFKC, NFD, NFKD, "
          "Lowercase, Strip, StripAccents, Replace, Prepend)",
          source, where, type);
    }
    spec.normalizers.push_back(std::move(step));
    return Status::Ok();
  }

  // SentencePiece-style vocabularies (Llama 2, Gemma, Phi-3) end their normalizer with Replace(" " ->
  // U+2581) and Prepend(U+2581). Those two trailing steps become the metaspace rules, which decoding
  // also follows (U+2581 decodes as a space, the prepended one is dropped).
  void LiftMetaspaceNormalizers() {
    const std::string space = EscapeRegex(" ");
    bool replace = false;
    bool prepend = false;
    size_t keep = spec.normalizers.size();
    while (keep > 0) {
      const NormalizerStep& s = spec.normalizers[keep - 1];
      if (!replace && s.kind == NormalizerStep::Kind::kReplace && s.pattern == space &&
          s.content == kMetaspace) {
        replace = true;
      } else if (!prepend && s.kind == NormalizerStep::Kind::kPrepend && s.content == kMetaspace) {
        prepend = true;
      } else {
        break;
      }
      --keep;
    }
    if (!replace) return;
    spec.normalizers.resize(keep);
    spec.metaspace = true;
    spec.add_space_prefix = prepend;
  }

  Status ParsePreTokenizer(const json& p, const std::string& where) {
    if (p.is_null()) return Status::Ok();
    if (!p.is_object()) return Corrupt("{}: {} is not an object", source, where);
    const std::string type = p.value("type", "");
    if (type == "Sequence") {
      const auto list = p.find("pretokenizers");
      if (list == p.end() || !list->is_array())
        return Corrupt("{}: {}.pretokenizers is not an array", source, where);
      for (size_t i = 0; i < list->size(); ++i) {
        FAK_RETURN_IF_ERROR(ParsePreTokenizer((*list)[i], fmt::format("{}.pretokenizers[{}]", where, i)));
      }
      return Status::Ok();
    }
    const bool first = steps_seen == 0;
    ++steps_seen;
    auto split = [&](std::string pattern, SplitBehavior behavior, bool invert = false) {
      spec.split_patterns.emplace_back(std::move(pattern), behavior, invert, after_byte_level);
    };
    if (type == "ByteLevel") {
      spec.byte_level = true;
      if (GetBool(p, "add_prefix_space", false)) {
        // The space goes in front of every piece earlier steps made; fak does it for the whole text.
        if (!first) {
          return Unsupported(
              "{}: {} (ByteLevel with add_prefix_space) after another pre-tokenizer step is not "
              "supported",
              source, where);
        }
        spec.add_prefix_space = true;
      }
      if (GetBool(p, "use_regex", true)) spec.split_patterns.emplace_back(kGpt2SplitPattern);
      after_byte_level = true;
      return Status::Ok();
    }
    if (type == "Split") {
      FAK_ASSIGN_OR_RETURN(std::string pattern, PatternOf(p, where));
      const std::string b = p.value("behavior", "");
      SplitBehavior behavior;
      if (b == "Isolated") {
        behavior = SplitBehavior::kIsolated;
      } else if (b == "Removed") {
        behavior = SplitBehavior::kRemoved;
      } else if (b == "MergedWithPrevious") {
        behavior = SplitBehavior::kMergedWithPrevious;
      } else if (b == "MergedWithNext") {
        behavior = SplitBehavior::kMergedWithNext;
      } else if (b == "Contiguous") {
        behavior = SplitBehavior::kContiguous;
      } else {
        return Corrupt(
            "{}: {}.behavior '{}' is not a split behaviour (Isolated, Removed, MergedWithPrevious, "
            "MergedWithNext, Contiguous)",
            source, where, b);
      }
      split(std::move(pattern), behavior, GetBool(p, "invert", false));
      return Status::Ok();
    }
    if (type == "Digits") {
      split(GetBool(p, "individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)", SplitBehavior::kIsolated);
      return Status::Ok();
    }
    if (type == "Punctuation" || type == "BertPreTokenizer") {
      SplitBehavior behavior = SplitBehavior::kIsolated;
      if (type == "BertPreTokenizer") {
        split(R"(\s+)", SplitBehavior::kRemoved);
      } else if (p.value("behavior", "Isolated") == "Contiguous") {
        behavior = SplitBehavior::kContiguous;
      } else if (p.value("behavior", "Isolated") == "Removed") {
        behavior = SplitBehavior::kRemoved;
      } else if (p.value("behavior", "Isolated") == "MergedWithPrevious") {
        behavior = SplitBehavior::kMergedWithPrevious;
      } else if (p.value("behavior", "Isolated") == "MergedWithNext") {
        behavior = SplitBehavior::kMergedWithNext;
      }
      // Unicode punctuation and ASCII punctuation (which counts $+<=>^`|~ too), one character at a time.
      split(R"([\p{P}!-/:-@\[-`{-~])", behavior);
      return Status::Ok();
    }
    if (type == "Whitespace") {
      split(R"(\w+|[^\w\s]+)", SplitBehavior::kRemoved, /*invert=*/true);
      return Status::Ok();
    }
    if (type == "WhitespaceSplit") {
      split(R"(\s+)", SplitBehavior::kRemoved);
      return Status::Ok();
    }
    if (type == "CharDelimiterSplit") {
      split(EscapeRegex(p.value("delimiter", "")), SplitBehavior::kRemoved);
      return Status::Ok();
    }
    if (type == "Metaspace") {
      if (p.value("replacement", std::string(kMetaspace)) != kMetaspace) {
        return Unsupported("{}: {} replacement other than U+2581", source, where);
      }
      // Metaspace rewrites each piece earlier steps made; fak does it for the whole text.
      if (!first) {
        return Unsupported("{}: {} (Metaspace) after another pre-tokenizer step is not supported", source,
                           where);
      }
      spec.metaspace = true;
      const std::string scheme =
          p.value("prepend_scheme", GetBool(p, "add_prefix_space", true) ? "always" : "never");
      spec.add_space_prefix = scheme != "never";
      spec.space_prefix_first_only = scheme == "first";
      spec.space_prefix_if_missing = true;
      // split = true: each U+2581 starts a new word.
      if (GetBool(p, "split", true)) split(std::string(kMetaspace), SplitBehavior::kMergedWithNext);
      return Status::Ok();
    }
    return Unsupported(
        "{}: {} of type '{}' is not supported (fak knows Sequence, Split, ByteLevel, Digits, "
        "Punctuation, Whitespace, WhitespaceSplit, CharDelimiterSplit, BertPreTokenizer, Metaspace)",
        source, where, type);
  }

  void ParsePostProcessor(const json& p) {
    if (!p.is_object()) return;
    const std::string type = p.value("type", "");
    if (type == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
      for (const json& q : p["processors"]) ParsePostProcessor(q);
      return;
    }
    if (type != "TemplateProcessing" || !p.contains("single") || !p["single"].is_array()) return;
    bool seen_sequence = false;
    for (const json& piece : p["single"]) {
      if (piece.contains("Sequence")) {
        seen_sequence = true;
      } else if (piece.contains("SpecialToken") && piece["SpecialToken"].is_object()) {
        const std::string name = piece["SpecialToken"].value("id", "");
        const auto it = std::find(spec.tokens.begin(), spec.tokens.end(), name);
        if (it == spec.tokens.end()) continue;
        const auto id = static_cast<int32_t>(it - spec.tokens.begin());
        if (seen_sequence) {
          spec.eos_id = id;
          spec.add_eos = true;
        } else {
          spec.bos_id = id;
          spec.add_bos = true;
        }
      }
    }
  }

  int32_t IdOf(const std::string& content) const {
    for (const AddedToken& a : spec.added_tokens) {
      if (a.content == content) return a.id;
    }
    const auto it = std::find(spec.tokens.begin(), spec.tokens.end(), content);
    return it == spec.tokens.end() ? -1 : static_cast<int32_t>(it - spec.tokens.begin());
  }

  Status ParseConfig(const json& c) {
    if (!c.is_object()) return Corrupt("{}: tokenizer_config.json is not an object", source);
    if (c.contains("add_bos_token") && c["add_bos_token"].is_boolean())
      spec.add_bos = c["add_bos_token"].get<bool>();
    if (c.contains("add_eos_token") && c["add_eos_token"].is_boolean())
      spec.add_eos = c["add_eos_token"].get<bool>();
    struct Named {
      const char* key;
      int32_t* id;
    };
    for (const Named& nm : {Named{"bos_token", &spec.bos_id}, Named{"eos_token", &spec.eos_id},
                            Named{"unk_token", &spec.unk_id}, Named{"pad_token", &spec.pad_id}}) {
      const auto it = c.find(nm.key);
      if (it == c.end()) continue;
      const std::string content = TokenContent(*it);
      if (content.empty()) continue;
      const int32_t id = IdOf(content);
      if (id < 0)
        return Corrupt("{}: tokenizer_config.json {} '{}' is not in the vocabulary", source, nm.key, content);
      *nm.id = id;
    }
    const auto tmpl = c.find("chat_template");
    if (tmpl != c.end()) {
      if (tmpl->is_string()) {
        spec.chat_template = tmpl->get<std::string>();
      } else if (tmpl->is_array()) {  // [{"name": "default", "template": "..."}, ...]
        for (const json& t : *tmpl) {
          if (t.is_object() && t.value("name", "") == "default" && t.contains("template") &&
              t["template"].is_string()) {
            spec.chat_template = t["template"].get<std::string>();
          }
        }
      }
    }
    return Status::Ok();
  }
};

Status ParseRoot(const json& root, const json& config, const std::string& source, TokenizerSpec& spec) {
  Parser p{source, spec};
  const auto model = root.find("model");
  if (model == root.end()) return NotFound("{}: missing field model", source);
  if (!model->is_object()) return Corrupt("{}: model is not an object", source);
  FAK_RETURN_IF_ERROR(p.ParseModel(*model));
  if (root.contains("added_tokens")) FAK_RETURN_IF_ERROR(p.ParseAddedTokens(root["added_tokens"]));
  if (root.contains("normalizer")) {
    FAK_RETURN_IF_ERROR(p.ParseNormalizer(root["normalizer"], "normalizer"));
    p.LiftMetaspaceNormalizers();
  }
  if (root.contains("pre_tokenizer")) {
    FAK_RETURN_IF_ERROR(p.ParsePreTokenizer(root["pre_tokenizer"], "pre_tokenizer"));
  }
  if (root.contains("decoder") && root["decoder"].is_object() &&
      root["decoder"].value("type", "") == "ByteLevel") {
    spec.byte_level = true;
  }
  if (root.contains("post_processor")) p.ParsePostProcessor(root["post_processor"]);
  if (!config.is_null()) FAK_RETURN_IF_ERROR(p.ParseConfig(config));
  return Status::Ok();
}

}  // namespace

Result<TokenizerSpec> TokenizerSpecFromHfJson(std::string_view json_text, std::string_view config_text,
                                              const std::string& source) {
  json root;
  json config;
  try {
    root = json::parse(json_text);
    if (!config_text.empty()) config = json::parse(config_text);
  } catch (const json::parse_error& e) {
    return Corrupt("{}: JSON syntax error at byte {}: {}", source, e.byte, e.what());
  } catch (const json::exception& e) {  // e.g. a number too large for a double (out_of_range)
    return Corrupt("{}: unreadable JSON: {}", source, e.what());
  }
  if (!root.is_object()) return Corrupt("{}: top level is not an object", source);
  TokenizerSpec spec;
  spec.source = source;
  spec.model = TokenizerModel::kBpe;
  spec.byte_level = false;
  // Field accessors below check types first; a value of an unexpected type deeper inside (a number
  // where a string belongs) surfaces as a json::type_error, reported like any other corrupt field.
  try {
    FAK_RETURN_IF_ERROR(ParseRoot(root, config, source, spec));
  } catch (const json::exception& e) {
    return Corrupt("{}: unexpected value: {}", source, e.what());
  }
  return spec;
}

}  // namespace fak
