// Pre-tokenizer split: a sequence of split rules, each a PCRE2 regex (UTF + UCP) and what becomes of its
// matches (HuggingFace's Split behaviours). Each rule splits every piece left by the previous one; the
// regex sees one piece at a time, as in HuggingFace. The input must be valid UTF-8.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace fak {

// What a split rule does with a match (HuggingFace's SplitDelimiterBehavior).
enum class SplitBehavior : uint8_t {
  kIsolated,            // matches and the text between them are separate pieces
  kRemoved,             // matches are dropped
  kMergedWithPrevious,  // a match joins the piece before it ("a-" "b")
  kMergedWithNext,      // a match joins the piece after it ("a" "-b")
  kContiguous,          // adjacent matches form one piece
};

struct SplitRule {
  std::string pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;  // the text between matches is treated as the matches
  // Run on the GPT-2 byte-level form of each piece (HuggingFace steps after a ByteLevel step see
  // mapped text, where e.g. byte 0xB2 is the digit-like U+00B2). Pieces stay byte ranges of the input.
  bool on_byte_level = false;

  SplitRule() = default;
  // An isolated split by `p`, the common case.
  SplitRule(std::string p) : pattern(std::move(p)) {}  // NOLINT(google-explicit-constructor)
  SplitRule(const char* p) : pattern(p) {}             // NOLINT(google-explicit-constructor)
  SplitRule(std::string p, SplitBehavior b, bool inv = false, bool byte_level = false)
      : pattern(std::move(p)), behavior(b), invert(inv), on_byte_level(byte_level) {}
  bool operator==(const SplitRule&) const = default;
};

// What a GGUF tokenizer.ggml.pre name means for a gpt2-model (BPE) vocabulary, as llama.cpp reads it.
struct GgufPreTokenizer {
  std::vector<SplitRule> splits;
  bool ignore_merges = false;      // a pre-token that is itself in the vocabulary is one token
  bool byte_level = true;          // GPT-2 byte mapping; false: raw UTF-8 with <0xAB> byte fallback
  bool escape_whitespace = false;  // spaces become U+2581 before splitting (SentencePiece-style BPE)
};

// NotFound for a name llama.cpp does not know either.
Result<GgufPreTokenizer> GgufPreTokenizerFor(std::string_view pre);

// Every tokenizer.ggml.pre name GgufPreTokenizerFor knows.
std::vector<std::string_view> KnownGgufPreNames();

// The split rules of a GGUF pre-tokenizer name (GgufPreTokenizerFor(pre).splits).
Result<std::vector<SplitRule>> PreSplitPatternsForGgufPre(std::string_view pre);

// GPT-2's ByteLevel regex, used by tokenizer.json files whose ByteLevel step has use_regex = true.
extern const char kGpt2SplitPattern[];

class PreSplitter {
 public:
  PreSplitter();
  ~PreSplitter();
  PreSplitter(PreSplitter&&) noexcept;
  PreSplitter& operator=(PreSplitter&&) noexcept;
  PreSplitter(const PreSplitter&) = delete;
  PreSplitter& operator=(const PreSplitter&) = delete;

  // Compiles the patterns; the error names the pattern and the offset of the problem in it.
  static Result<PreSplitter> Create(const std::vector<SplitRule>& rules);

  // Appends the pieces of `text` (non-empty views into it, in order; they cover it exactly unless a
  // rule removes matches) to `pieces`. Safe to call from several threads at once.
  void Split(std::string_view text, std::vector<std::string_view>* pieces) const;

  size_t num_patterns() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fak
