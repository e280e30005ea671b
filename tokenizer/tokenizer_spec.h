// TokenizerSpec: everything a tokenizer needs, as plain data. Filled from GGUF metadata
// (spec_gguf.cpp) or from HuggingFace tokenizer.json + tokenizer_config.json (spec_hf.cpp), then
// turned into a Tokenizer (tokenizer.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/normalizer.h"  // NormalizerStep
#include "tokenizer/pre_split.h"   // SplitRule

namespace fak {

enum class TokenizerModel {
  kBpe,  // merge ranks (GPT-2, Qwen, Llama 3 byte-level; also HF BPE with byte fallback)
  kSpm,  // SentencePiece BPE: merge by the score of the merged piece (Llama 2, Phi-3 from GGUF)
};

// GGUF's tokenizer.ggml.token_type values.
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // BOS/EOS/<|im_start|>: split out of text only when special tokens are parsed
  kUserDefined = 4,  // always split out of text, never passed through the model
  kUnused = 5,
  kByte = 6,  // <0xAB> byte-fallback pieces
};

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = true;       // false: split out even when special tokens are not parsed
  bool lstrip = false;       // swallow whitespace to the left
  bool rstrip = false;       // swallow whitespace to the right
  bool single_word = false;  // match only when not inside a word
};

struct TokenizerSpec {
  std::string source;  // file the spec came from, for error messages
  TokenizerModel model = TokenizerModel::kBpe;

  // Vocabulary, indexed by id. Byte-level vocabularies hold pieces in GPT-2's printable alphabet
  // ("Ġthe"); SentencePiece ones use U+2581 for spaces ("▁the").
  std::vector<std::string> tokens;
  std::vector<float> scores;     // kSpm: merge priority of each piece (higher merges first)
  std::vector<TokenType> types;  // empty means all kNormal, except the added tokens
  std::vector<std::pair<std::string, std::string>> merges;  // kBpe, in rank order

  // Text pipeline.
  std::vector<NormalizerStep> normalizers;  // applied in order to each fragment of text
  bool byte_level = true;                   // map bytes to GPT-2's alphabet before the model (kBpe)
  bool add_prefix_space = false;            // byte level: prepend a space unless the text starts with one
  std::vector<SplitRule> split_patterns;    // pre-tokenizer splits, applied in order (kBpe)
  // Metaspace (SentencePiece-style): spaces become U+2581 and text gets one U+2581 in front; decoding
  // turns U+2581 back into spaces and drops the one in front.
  bool metaspace = false;
  bool add_space_prefix = false;         // the SentencePiece "dummy prefix"
  bool space_prefix_first_only = false;  // only the text at the very start gets it (Metaspace "first")
  bool space_prefix_if_missing = false;  // no prefix when the text starts with a space (HF Metaspace)
  bool byte_fallback = false;            // unknown characters become <0xAB> tokens
  bool ignore_merges = false;            // a pre-token that is itself in the vocabulary is one token

  // Special ids (-1: none) and what Encode adds when asked for special tokens.
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = false;
  bool add_eos = false;

  // Tokens matched in the raw text before normalization and the model. When empty, the tokens of
  // type kControl and kUserDefined are used.
  std::vector<AddedToken> added_tokens;

  std::string chat_template;  // Jinja source, when the file has one
};

}  // namespace fak
