#include "grammar/json_pattern.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "tokenizer/unicode.h"

namespace fak::grammar {

std::string JoinAlternatives(const std::vector<std::string>& alts) {
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + ("(" + alts[i] + ")");
  return out;
}

namespace {

// A regex subset (ECMA-style, as JSON schema uses) lowered to the characters of a JSON string.
class RegexLowering {
 public:
  RegexLowering(std::string_view re, std::string char_rule) : re_(re), ch_(std::move(char_rule)) {}

  Result<std::string> Run() {
    bool start = false, end = false;
    if (!re_.empty() && re_[0] == '^') {
      start = true;
      re_.remove_prefix(1);
    }
    if (!re_.empty() && re_.back() == '$' && (re_.size() < 2 || re_[re_.size() - 2] != '\\')) {
      end = true;
      re_.remove_suffix(1);
    }
    auto body = Alternation();
    if (!body.ok()) return body.status();
    if (pos_ != re_.size()) return Fail(fmt::format("unexpected '{}'", re_[pos_]));
    std::string out = "\"\\\"\" ";
    if (!start) out += ch_ + "* ";
    out += "(" + *body + ")";
    if (!end) out += " " + ch_ + "*";
    return out + " \"\\\"\"";
  }

 private:
  static Status Fail(const std::string& what) { return InvalidArgument("pattern: {}", what); }

  Result<std::string> Alternation() {
    std::vector<std::string> alts;
    while (true) {
      auto seq = Sequence();
      if (!seq.ok()) return seq.status();
      alts.push_back(seq->empty() ? "\"\"" : *seq);
      if (pos_ < re_.size() && re_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return JoinAlternatives(alts);
    }
  }

  Result<std::string> Sequence() {
    std::string out;
    while (pos_ < re_.size() && re_[pos_] != '|' && re_[pos_] != ')') {
      auto atom = Atom();
      if (!atom.ok()) return atom.status();
      std::string a = "(" + *atom + ")";
      if (pos_ < re_.size()) {
        const char q = re_[pos_];
        if (q == '*' || q == '+' || q == '?') {
          a += q;
          ++pos_;
        } else if (q == '{') {
          const size_t close = re_.find('}', pos_);
          if (close == std::string_view::npos) return Fail("'{' without '}'");
          std::string inner(re_.substr(pos_ + 1, close - pos_ - 1));
          if (inner.empty() || inner.find_first_not_of("0123456789,") != std::string::npos) {
            return Fail(fmt::format("bad repetition '{{{}}}'", inner));
          }
          a += "{" + inner + "}";
          pos_ = close + 1;
        }
        if (pos_ < re_.size() && re_[pos_] == '?') ++pos_;  // lazy: the same language
      }
      out += (out.empty() ? "" : " ") + a;
    }
    return out;
  }

  // A set of characters as a grammar expression for their JSON-string form: the characters a JSON
  // string holds raw, and the escapes of quote, backslash, newline, tab and carriage return.
  std::string Chars(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negate) {
    if (negate) {
      std::sort(ranges.begin(), ranges.end());
      std::vector<std::pair<uint32_t, uint32_t>> comp;
      uint32_t next = 0;
      for (const auto& [a, b] : ranges) {
        if (a > next) comp.emplace_back(next, a - 1);
        next = std::max(next, b + 1);
      }
      if (next <= 0x10FFFF) comp.emplace_back(next, 0x10FFFF);
      ranges = std::move(comp);
    }
    auto has = [&](uint32_t c) {
      return std::any_of(ranges.begin(), ranges.end(),
                         [c](const auto& r) { return r.first <= c && c <= r.second; });
    };
    std::vector<std::string> alts;
    std::string cls;
    for (auto [a, b] : ranges) {
      for (auto [x, y] : {std::pair<uint32_t, uint32_t>{0x20, 0x21}, {0x23, 0x5b}, {0x5d, 0x10FFFF}}) {
        const uint32_t l = std::max(a, x), h = std::min(b, y);
        if (l > h || (l >= 0xD800 && h <= 0xDFFF)) continue;
        cls += Esc(l);
        if (h != l) cls += "-" + Esc(h);
      }
    }
    if (!cls.empty()) alts.push_back("[" + cls + "]");
    if (has('"')) alts.push_back("\"\\\\\\\"\"");
    if (has('\\')) alts.push_back("\"\\\\\\\\\"");
    if (has('\n')) alts.push_back("\"\\\\n\"");
    if (has('\t')) alts.push_back("\"\\\\t\"");
    if (has('\r')) alts.push_back("\"\\\\r\"");
    if (alts.empty()) alts.push_back("[^\\x00-\\U0010ffff]");  // matches nothing; refused below
    return JoinAlternatives(alts);
  }

  static std::string Esc(uint32_t c) {
    if (c == ']' || c == '[' || c == '\\' || c == '^' || c == '-' || c == '"' || c < 0x20 || c == 0x7f) {
      return fmt::format("\\x{:02x}", c);
    }
    if (c < 0x80) return std::string(1, static_cast<char>(c));
    return fmt::format("\\U{:08x}", c);
  }

  Result<uint32_t> CodePoint() {
    if (ValidUtf8PrefixLength(re_.substr(pos_, 4)) == 0) return Fail("invalid UTF-8");
    const uint32_t cp = DecodeUtf8(re_, &pos_);
    return cp;
  }

  // An escape after the backslash: a class (\d \w \s and negations) or one character.
  Result<std::vector<std::pair<uint32_t, uint32_t>>> Escape(bool* negate) {
    if (pos_ >= re_.size()) return Fail("a backslash at the end");
    const char e = re_[pos_++];
    *negate = false;
    using R = std::vector<std::pair<uint32_t, uint32_t>>;
    switch (e) {
      case 'd': return R{{'0', '9'}};
      case 'D': *negate = true; return R{{'0', '9'}};
      case 'w': return R{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
      case 'W': *negate = true; return R{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
      case 's': return R{{'\t', '\r'}, {' ', ' '}};
      case 'S': *negate = true; return R{{'\t', '\r'}, {' ', ' '}};
      case 'n': return R{{'\n', '\n'}};
      case 't': return R{{'\t', '\t'}};
      case 'r': return R{{'\r', '\r'}};
      default: break;
    }
    if (std::string_view(".^$|?*+()[]{}\\/-").find(e) != std::string_view::npos) {
      return R{{static_cast<uint32_t>(e), static_cast<uint32_t>(e)}};
    }
    return Fail(fmt::format("the escape '\\{}' is not supported", e));
  }

  Result<std::string> Atom() {
    const char c = re_[pos_];
    if (c == '(') {
      ++pos_;
      if (re_.substr(pos_, 2) == "?:") {
        pos_ += 2;
      } else if (pos_ < re_.size() && re_[pos_] == '?') {
        return Fail("lookaround and named groups are not supported");
      }
      auto inner = Alternation();
      if (!inner.ok()) return inner.status();
      if (pos_ >= re_.size() || re_[pos_] != ')') return Fail("'(' without ')'");
      ++pos_;
      return *inner;
    }
    if (c == '[') {
      ++pos_;
      bool negate = false;
      if (pos_ < re_.size() && re_[pos_] == '^') {
        negate = true;
        ++pos_;
      }
      std::vector<std::pair<uint32_t, uint32_t>> ranges;
      bool first = true;
      while (true) {
        if (pos_ >= re_.size()) return Fail("'[' without ']'");
        if (re_[pos_] == ']' && !first) {
          ++pos_;
          break;
        }
        first = false;
        uint32_t a = 0;
        if (re_[pos_] == '\\') {
          ++pos_;
          bool neg = false;
          auto r = Escape(&neg);
          if (!r.ok()) return r.status();
          if (neg) return Fail("a negated class escape inside [] is not supported");
          if (r->size() != 1 || (*r)[0].first != (*r)[0].second) {
            ranges.insert(ranges.end(), r->begin(), r->end());
            continue;
          }
          a = (*r)[0].first;
        } else {
          auto cp = CodePoint();
          if (!cp.ok()) return cp.status();
          a = *cp;
        }
        uint32_t b = a;
        if (pos_ + 1 < re_.size() && re_[pos_] == '-' && re_[pos_ + 1] != ']') {
          ++pos_;
          if (re_[pos_] == '\\') {
            ++pos_;
            bool neg = false;
            auto r = Escape(&neg);
            if (!r.ok()) return r.status();
            if (neg || r->size() != 1 || (*r)[0].first != (*r)[0].second)
              return Fail("a class as a range end");
            b = (*r)[0].first;
          } else {
            auto cp = CodePoint();
            if (!cp.ok()) return cp.status();
            b = *cp;
          }
          if (b < a) return Fail("a range with its end before its start");
        }
        ranges.emplace_back(a, b);
      }
      return Chars(ranges, negate);
    }
    if (c == '.') {
      ++pos_;
      return Chars({{'\n', '\n'}, {'\r', '\r'}}, true);
    }
    if (c == '\\') {
      ++pos_;
      if (pos_ < re_.size() && re_[pos_] >= '1' && re_[pos_] <= '9')
        return Fail("backreferences are not supported");
      if (pos_ < re_.size() && (re_[pos_] == 'b' || re_[pos_] == 'B'))
        return Fail("word boundaries are not supported");
      bool negate = false;
      auto r = Escape(&negate);
      if (!r.ok()) return r.status();
      return Chars(*r, negate);
    }
    if (c == '^' || c == '$') return Fail("anchors inside the pattern are not supported");
    if (c == '*' || c == '+' || c == '?' || c == '{')
      return Fail(fmt::format("'{}' with nothing to repeat", c));
    auto cp = CodePoint();
    if (!cp.ok()) return cp.status();
    return Chars({{*cp, *cp}}, false);
  }

  std::string_view re_;
  std::string ch_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::string> PatternToGrammar(std::string_view re, const std::string& char_rule) {
  return RegexLowering(re, char_rule).Run();
}

}  // namespace fak::grammar
