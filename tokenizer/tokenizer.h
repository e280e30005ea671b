// Tokenizer: text to token ids and back, for byte-level BPE (GPT-2, Qwen, Llama 3, Falcon) and
// SentencePiece-style BPE (Llama 2, Phi-3). Built from a TokenizerSpec; see loader.h to load one
// from a GGUF file or a HuggingFace tokenizer.json.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer_spec.h"

namespace fak {

struct EncodeOptions {
  bool add_special = true;     // add BOS/EOS as the tokenizer's metadata asks
  bool parse_special = false;  // match control tokens (<|im_start|>, <s>) written in the text
};

struct DecodeOptions {
  bool skip_special = false;  // drop control and unknown tokens instead of writing their text
};

class Tokenizer {
 public:
  Tokenizer();
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Validates the spec (ids in range, merges that name known tokens, regexes that compile).
  static Result<Tokenizer> Create(TokenizerSpec spec);

  // Invalid UTF-8 in `text` is replaced by U+FFFD first, as the reference tokenizers do with
  // decoded Python strings. Safe to call from several threads at once.
  Result<std::vector<int32_t>> Encode(std::string_view text, EncodeOptions options = {}) const;

  // Concatenated text of the tokens; ill-formed UTF-8 in the result becomes U+FFFD.
  Result<std::string> Decode(std::span<const int32_t> ids, DecodeOptions options = {}) const;

  // The bytes one token contributes to decoded text (before the leading-space rule of SentencePiece
  // tokenizers); may be part of a UTF-8 character. Empty for skipped special tokens.
  Result<std::string> TokenBytes(int32_t id, DecodeOptions options = {}) const;

  // The token's piece as the vocabulary stores it ("Ġthe", "▁the", "<|im_end|>").
  const std::string& TokenText(int32_t id) const;
  // Id of the piece with exactly this text, or -1.
  int32_t FindToken(std::string_view piece) const;
  TokenType GetTokenType(int32_t id) const;
  bool IsSpecial(int32_t id) const;  // control or unknown: what skip_special drops

  int32_t vocab_size() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  const TokenizerSpec& spec() const;
  // True when decoded text drops one leading space (SentencePiece dummy prefix).
  bool strips_leading_space() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Streaming decoder: feed one token at a time, get text that never ends in a partial UTF-8
// character. Concatenating all outputs (and Flush) equals Tokenizer::Decode of the whole sequence.
class Detokenizer {
 public:
  // `continuation`: the tokens continue text that came before (a prompt), so the first one is not the
  // start of the text and keeps its leading space ("import" + "▁types" streams " types"). Without it
  // they are a whole text, decoded as Tokenizer::Decode decodes it.
  //
  // `raw`: each token's bytes are appended as they come, as llama.cpp's command-line tools write them to
  // a terminal (which assembles a character split across tokens, or across the prompt and the
  // continuation); otherwise a character's bytes are held until it is complete and invalid bytes become
  // U+FFFD, so every piece of text is valid UTF-8 on its own (API responses, chat turns).
  explicit Detokenizer(const Tokenizer& tokenizer, DecodeOptions options = {}, bool continuation = false,
                       bool raw = false);

  // Appends the newly complete text after token `id` to *out.
  Status Push(int32_t id, std::string* out);
  // Appends what is held back (an incomplete character becomes U+FFFD) and resets the state.
  void Flush(std::string* out);

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::string pending_;  // bytes of a character still missing its continuation bytes
  bool continuation_ = false;
  bool raw_ = false;
  bool at_start_ = true;
};

}  // namespace fak
