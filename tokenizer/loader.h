// LoadTokenizer: a Tokenizer from a .gguf file, a tokenizer.json, or a model directory.
#pragma once

#include <string>

#include "core/status.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_spec.h"

namespace fak {

// `path` is a GGUF file (by its magic), a tokenizer.json (tokenizer_config.json beside it is read
// too), a SentencePiece tokenizer.model, or a directory holding tokenizer.json or tokenizer.model.
Result<TokenizerSpec> LoadTokenizerSpec(const std::string& path);
Result<Tokenizer> LoadTokenizer(const std::string& path);

}  // namespace fak
