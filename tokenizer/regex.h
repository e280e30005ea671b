// A PCRE2 regex (UTF + UCP, JIT-compiled when possible) for the tokenizer's pre-tokenizer splits and
// normalizer replacements. Subjects must be valid UTF-8.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace fak {

class Regex {
 public:
  Regex();
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The error names the pattern and the offset of the problem in it.
  static Result<Regex> Compile(const std::string& pattern);

  struct Match {
    size_t begin;
    size_t end;
  };
  // Replaces *matches with the successive matches in `subject`, as a find-all loop does: after an
  // empty match the search resumes one character later. Empty matches are kept (they split text).
  // Safe to call from several threads at once.
  void FindAll(std::string_view subject, std::vector<Match>* matches) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::unique_ptr<Code> code_;
  std::string pattern_;
};

}  // namespace fak
