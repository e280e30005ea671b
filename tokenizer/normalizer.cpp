#include "tokenizer/normalizer.h"

#include <utf8proc.h>  // utf8proc_tolower, utf8proc_category

#include "tokenizer/regex.h"  // Regex

namespace fak {
namespace {

// Unicode White_Space (what Rust's char::is_whitespace tests).
bool IsWhiteSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

std::string Lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<uint8_t>(text[i]);
    if (b < 0x80) {
      out.push_back(b >= 'A' && b <= 'Z' ? static_cast<char>(b + 32) : static_cast<char>(b));
      ++i;
      continue;
    }
    const uint32_t cp = DecodeUtf8(text, &i);
    if (cp == 0x130) {  // the one unconditional one-to-many lowercase mapping: İ -> i + U+0307
      out += "i\xCC\x87";
      continue;
    }
    AppendUtf8(static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))), &out);
  }
  return out;
}

std::string StripAccents(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    const uint32_t cp = DecodeUtf8(text, &i);
    const utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    if (cat != UTF8PROC_CATEGORY_MN && cat != UTF8PROC_CATEGORY_MC && cat != UTF8PROC_CATEGORY_ME) {
      out.append(text, start, i - start);
    }
  }
  return out;
}

std::string Strip(std::string_view text, bool left, bool right) {
  size_t begin = 0;
  size_t end = text.size();
  if (left) {
    while (begin < end) {
      size_t i = begin;
      if (!IsWhiteSpace(DecodeUtf8(text, &i))) break;
      begin = i;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
      size_t i = start;
      if (!IsWhiteSpace(DecodeUtf8(text, &i))) break;
      end = start;
    }
  }
  return std::string(text.substr(begin, end - begin));
}

}  // namespace

std::string EscapeRegex(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}-/#").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

struct Normalizer::Impl {
  struct Step {
    NormalizerStep step;
    Regex regex;  // kReplace
  };
  std::vector<Step> steps;
};

Normalizer::Normalizer() : impl_(std::make_unique<Impl>()) {}
Normalizer::~Normalizer() = default;
Normalizer::Normalizer(Normalizer&&) noexcept = default;
Normalizer& Normalizer::operator=(Normalizer&&) noexcept = default;

bool Normalizer::empty() const { return impl_->steps.empty(); }

Result<Normalizer> Normalizer::Create(const std::vector<NormalizerStep>& steps) {
  Normalizer n;
  for (const NormalizerStep& step : steps) {
    Impl::Step s{step, Regex()};
    if (step.kind == NormalizerStep::Kind::kReplace) {
      Result<Regex> regex = Regex::Compile(step.pattern);
      if (!regex.ok()) return regex.status().WithContext("normalizer Replace");
      s.regex = std::move(regex).value();
    }
    n.impl_->steps.push_back(std::move(s));
  }
  return n;
}

Result<std::string> Normalizer::Apply(std::string_view text) const {
  std::string cur(text);
  std::vector<Regex::Match> matches;
  for (const Impl::Step& s : impl_->steps) {
    const NormalizerStep& step = s.step;
    switch (step.kind) {
      case NormalizerStep::Kind::kUnicode: {
        FAK_ASSIGN_OR_RETURN(cur, Normalize(cur, step.form));
        break;
      }
      case NormalizerStep::Kind::kLowercase: cur = Lowercase(cur); break;
      case NormalizerStep::Kind::kStrip: cur = Strip(cur, step.left, step.right); break;
      case NormalizerStep::Kind::kStripAccents: cur = StripAccents(cur); break;
      case NormalizerStep::Kind::kReplace: {
        s.regex.FindAll(cur, &matches);
        if (matches.empty()) break;
        std::string out;
        out.reserve(cur.size());
        size_t prev = 0;
        for (const Regex::Match& m : matches) {
          out.append(cur, prev, m.begin - prev);
          out += step.content;
          prev = m.end;
        }
        out.append(cur, prev, std::string::npos);
        cur = std::move(out);
        break;
      }
      case NormalizerStep::Kind::kPrepend:
        if (!cur.empty()) cur.insert(0, step.content);
        break;
    }
  }
  return cur;
}

}  // namespace fak
