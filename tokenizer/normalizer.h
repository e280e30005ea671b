// Text normalizers run on each fragment of input text before the pre-tokenizer: the building blocks of
// HuggingFace tokenizer.json "normalizer" sections (Unicode forms, Lowercase, Strip, StripAccents,
// Replace, Prepend), applied in order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/unicode.h"  // NormalizationForm

namespace fak {

struct NormalizerStep {
  enum class Kind : uint8_t {
    kUnicode,       // NFC / NFKC / NFD / NFKD
    kLowercase,     // Unicode lowercase of each character (with İ -> i + U+0307)
    kStrip,         // drop White_Space characters at the left and/or right end
    kStripAccents,  // drop combining marks (Mn, Mc, Me), meant to follow NFD/NFKD
    kReplace,       // every match of `pattern` (a regex) becomes `content`
    kPrepend,       // `content` goes in front of non-empty text
  };
  Kind kind = Kind::kUnicode;
  NormalizationForm form = NormalizationForm::kNone;  // kUnicode
  std::string pattern;                                // kReplace
  std::string content;                                // kReplace, kPrepend
  bool left = true;                                   // kStrip
  bool right = true;                                  // kStrip
  bool operator==(const NormalizerStep&) const = default;
};

// Regex that matches `s` literally (a HuggingFace String pattern).
std::string EscapeRegex(std::string_view s);

class Normalizer {
 public:
  Normalizer();
  ~Normalizer();
  Normalizer(Normalizer&&) noexcept;
  Normalizer& operator=(Normalizer&&) noexcept;
  Normalizer(const Normalizer&) = delete;
  Normalizer& operator=(const Normalizer&) = delete;

  // Compiles the Replace patterns; the error names the pattern.
  static Result<Normalizer> Create(const std::vector<NormalizerStep>& steps);

  bool empty() const;
  // Runs the steps over valid UTF-8 text. Safe to call from several threads at once.
  Result<std::string> Apply(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fak
