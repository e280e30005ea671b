// TokenizerSpec from a HuggingFace tokenizer.json (and, when given, tokenizer_config.json).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "tokenizer/tokenizer_spec.h"

namespace fak {

// `json` is the text of tokenizer.json, `config_json` that of tokenizer_config.json or empty;
// `source` names the file in errors ("qwen3/tokenizer.json: model.vocab is not an object").
// Supports model BPE with the NFC/NFKC/NFD/NFKD, Prepend and Replace normalizers and the ByteLevel,
// Split and Metaspace pre-tokenizers; anything else is an Unsupported error that names it.
Result<TokenizerSpec> TokenizerSpecFromHfJson(std::string_view json, std::string_view config_json,
                                              const std::string& source);

}  // namespace fak
