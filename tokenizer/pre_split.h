// Pre-tokenizer split: a sequence of PCRE2 regexes (UTF + UCP, JIT-compiled). Each regex splits every
// piece left by the previous one into its matches and the text between them ("Isolated" behaviour of
// HuggingFace's Split and of ByteLevel's own regex). The input must be valid UTF-8.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace fak {

// The split patterns of the pre-tokenizer names GGUF files carry in tokenizer.ggml.pre. NotFound for a
// name fak does not know.
Result<std::vector<std::string>> PreSplitPatternsForGgufPre(std::string_view pre);

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
  static Result<PreSplitter> Create(const std::vector<std::string>& patterns);

  // Appends the pieces of `text` (views into it, in order, covering it exactly) to `pieces`.
  // Safe to call from several threads at once.
  void Split(std::string_view text, std::vector<std::string_view>* pieces) const;

  size_t num_patterns() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fak
