// TokenizerSpec from a SentencePiece model file (tokenizer.model: a serialized ModelProto).
#pragma once

#include <span>
#include <string>

#include "core/status.h"
#include "tokenizer/tokenizer_spec.h"

namespace fak {

// Reads the pieces (text, score, type), the trainer's model type and special ids, and the normalizer
// flags. Only BPE models whose normalizer keeps whitespace as is (Llama 2 and relatives) are
// supported; others are an Unsupported error. `source` names the file in errors.
Result<TokenizerSpec> TokenizerSpecFromSentencePiece(std::span<const uint8_t> bytes,
                                                     const std::string& source);

}  // namespace fak
