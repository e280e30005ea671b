// TokenizerSpec from GGUF metadata (tokenizer.ggml.*).
#pragma once

#include "core/status.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer_spec.h"

namespace fak {

// Reads tokenizer.ggml.model ("gpt2" byte-level BPE, "llama" SentencePiece), .pre, .tokens, .scores,
// .token_type, .merges, the special ids and the add_* flags. Errors name the key.
Result<TokenizerSpec> TokenizerSpecFromGguf(const GgufFile& gguf);

}  // namespace fak
