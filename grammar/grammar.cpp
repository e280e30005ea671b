#include "grammar/grammar.h"

#include "tokenizer/unicode.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace fak::grammar {

namespace {

constexpr int64_t kMaxElements = 4'000'000;  // a grammar larger than this is refused
constexpr int64_t kMaxRepeat = 100'000;      // the largest {m,n} bound
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

using Seq = std::vector<Element>;
using Range = std::pair<uint32_t, uint32_t>;  // code points, inclusive

// A code point range as alternatives of UTF-8 byte-range sequences (the split that keeps every
// sequence a product of byte ranges).
void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<Range>>* out) {
  static constexpr uint32_t kLenMax[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (int n = 0; n < 3; ++n) {
    if (lo <= kLenMax[n] && hi > kLenMax[n]) {
      Utf8Sequences(lo, kLenMax[n], out);
      Utf8Sequences(kLenMax[n] + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out->push_back({{lo, hi}});
    return;
  }
  const int len = hi <= 0x7FF ? 2 : hi <= 0xFFFF ? 3 : 4;
  for (int i = 1; i < len; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Utf8Sequences(lo, lo | m, out);
        Utf8Sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Utf8Sequences(lo, (hi & ~m) - 1, out);
        Utf8Sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  AppendUtf8(lo, &a);
  AppendUtf8(hi, &b);
  std::vector<Range> seq;
  for (size_t k = 0; k < a.size(); ++k) {
    seq.emplace_back(static_cast<unsigned char>(a[k]), static_cast<unsigned char>(b[k]));
  }
  out->push_back(std::move(seq));
}

// Sorted, merged, surrogates removed; `negate` complements within the code point space.
std::vector<Range> Normalize(std::vector<Range> in, bool negate) {
  std::sort(in.begin(), in.end());
  std::vector<Range> merged;
  for (const auto& r : in) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (negate) {
    std::vector<Range> comp;
    uint32_t next = 0;
    for (const auto& r : merged) {
      if (r.first > next) comp.emplace_back(next, r.first - 1);
      next = r.second + 1;
    }
    if (next <= kMaxCodePoint) comp.emplace_back(next, kMaxCodePoint);
    merged = std::move(comp);
  }
  std::vector<Range> out;
  for (const auto& r : merged) {
    if (r.second < 0xD800 || r.first > 0xDFFF) {
      out.push_back(r);
      continue;
    }
    if (r.first < 0xD800) out.emplace_back(r.first, 0xD7FF);
    if (r.second > 0xDFFF) out.emplace_back(0xE000, r.second);
  }
  return out;
}

}  // namespace

// Builds a Grammar: rules by name, helper rules for groups, repetitions and character classes.
class Builder {
 public:
  int32_t Rule(const std::string& name) {
    auto [it, fresh] = by_name_.emplace(name, static_cast<int32_t>(rules_.size()));
    if (fresh) {
      rules_.emplace_back();
      names_.push_back(name);
      defined_.push_back(false);
      first_use_line_.push_back(line_);
    }
    return it->second;
  }
  int32_t Helper(const std::string& base) {
    const int32_t r = Rule(fmt::format("{}_{}", base, helpers_++));
    defined_[static_cast<size_t>(r)] = true;
    return r;
  }
  void Define(int32_t r, std::vector<Seq> alts) {
    rules_[static_cast<size_t>(r)] = std::move(alts);
    defined_[static_cast<size_t>(r)] = true;
  }
  bool Defined(int32_t r) const { return defined_[static_cast<size_t>(r)]; }
  int32_t ByteSet(const std::bitset<256>& b) {
    const std::string key = b.to_string();
    auto [it, fresh] = set_index_.emplace(key, static_cast<int32_t>(sets_.size()));
    if (fresh) sets_.push_back(b);
    return it->second;
  }
  static Element Bytes(int32_t set) { return {Element::Kind::kBytes, set}; }
  static Element Ref(int32_t rule) { return {Element::Kind::kRule, rule}; }

  // One element matching one character of `ranges` (code points).
  Element Class(const std::vector<Range>& ranges, const std::string& base) {
    std::string key;
    for (const auto& [a, b] : ranges) key += fmt::format("{:x}-{:x},", a, b);
    if (auto it = class_rule_.find(key); it != class_rule_.end()) return it->second;
    std::vector<std::vector<Range>> seqs;
    for (const auto& [a, b] : ranges) Utf8Sequences(a, b, &seqs);
    std::bitset<256> single;
    std::vector<Seq> alts;
    for (const auto& s : seqs) {
      if (s.size() == 1) {
        for (uint32_t c = s[0].first; c <= s[0].second; ++c) single.set(c);
        continue;
      }
      Seq seq;
      for (const auto& [a, b] : s) {
        std::bitset<256> bs;
        for (uint32_t c = a; c <= b; ++c) bs.set(c);
        seq.push_back(Bytes(ByteSet(bs)));
      }
      alts.push_back(std::move(seq));
    }
    Element e;
    if (alts.empty()) {
      e = Bytes(ByteSet(single));
    } else {
      if (single.any()) alts.insert(alts.begin(), Seq{Bytes(ByteSet(single))});
      const int32_t r = Helper(base + "_char");
      Define(r, std::move(alts));
      e = Ref(r);
    }
    class_rule_.emplace(key, e);
    return e;
  }

  // `x` repeated min..max times (max < 0: unbounded), as a sequence.
  Result<Seq> Repeat(const Seq& x, int64_t min, int64_t max, const std::string& base) {
    if (min > kMaxRepeat || max > kMaxRepeat) {
      return InvalidArgument(
          "{}", fmt::format("line {}: a repetition bound above {} is not supported", line_, kMaxRepeat));
    }
    Seq atom = x;
    if (x.size() != 1) {
      const int32_t r = Helper(base + "_group");
      Define(r, {x});
      atom = {Ref(r)};
    }
    if (max >= 8 && max > min) return CountedRun(atom[0], min, max, base);
    Seq out;
    for (int64_t i = 0; i < min; ++i) out.push_back(atom[0]);
    if (max < 0) {
      const int32_t r = Helper(base + "_star");
      Define(r, {Seq{atom[0], Ref(r)}, Seq{}});
      out.push_back(Ref(r));
    } else if (max > min) {
      int32_t prev = -1;
      for (int64_t k = 0; k < max - min; ++k) {
        const int32_t r = Helper(base + "_opt");
        Seq more{atom[0]};
        if (prev >= 0) more.push_back(Ref(prev));
        Define(r, {std::move(more), Seq{}});
        prev = r;
      }
      out.push_back(Ref(prev));
    }
    return out;
  }

  // X{min,max} as a chain of rules P_0 .. P_max (P_c: `X P_c+1`, and `""` once c >= min), a counted
  // run (grammar.h).
  Seq CountedRun(Element atom, int64_t min, int64_t max, const std::string& base) {
    int32_t x = atom.value;
    if (atom.kind != Element::Kind::kRule) {
      x = Helper(base + "_x");
      Define(x, {Seq{atom}});
    }
    const auto run = static_cast<int32_t>(runs_.size());
    const int32_t star = Helper(base + "_xs");
    Define(star, {Seq{Ref(x), Ref(star)}, Seq{}});
    runs_.push_back({x, star});
    int32_t next = Helper(base + "_n");
    Define(next, {Seq{}});
    for (int64_t c = max - 1; c >= 0; --c) {
      const int32_t r = Helper(base + "_n");
      std::vector<Seq> alts{Seq{Ref(x), Ref(next)}};
      if (c >= min) alts.emplace_back();
      Define(r, std::move(alts));
      chain_.emplace(r, Grammar::Marker{run, static_cast<int32_t>(max - c)});
      next = r;
    }
    return Seq{Ref(next)};
  }

  Result<Grammar> Finish(std::string_view root) {
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (!defined_[r]) {
        return InvalidArgument(
            "{}", fmt::format("line {}: rule '{}' is used but never defined", first_use_line_[r], names_[r]));
      }
    }
    auto it = by_name_.find(std::string(root));
    if (it == by_name_.end()) {
      return InvalidArgument("{}", fmt::format("the grammar has no rule '{}' to start from", root));
    }
    FAK_RETURN_IF_ERROR(CheckLeftRecursion());
    Grammar g;
    g.root_ = it->second;
    g.byte_sets_ = sets_;
    int64_t total = 0;
    g.runs_ = runs_;
    for (size_t r = 0; r < rules_.size(); ++r) {
      Grammar::Rule rule;
      rule.name = names_[r];
      if (auto it = chain_.find(static_cast<int32_t>(r)); it != chain_.end()) {
        g.markers_.emplace(static_cast<int32_t>(g.elements_.size()) + 1, it->second);  // after X in `X next`
      }
      for (const auto& alt : rules_[r]) {
        rule.alts.push_back(static_cast<int32_t>(g.elements_.size()));
        g.elements_.insert(g.elements_.end(), alt.begin(), alt.end());
        g.elements_.push_back({Element::Kind::kEnd, static_cast<int32_t>(r)});
        total += static_cast<int64_t>(alt.size()) + 1;
      }
      g.rules_.push_back(std::move(rule));
    }
    if (total > kMaxElements) {
      return InvalidArgument(
          "{}", fmt::format("the grammar has {} elements; at most {} are supported", total, kMaxElements));
    }
    return g;
  }

  void set_line(int line) { line_ = line; }

 private:
  Status CheckLeftRecursion() const {
    const size_t n = rules_.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const auto& alt : rules_[r]) {
          const bool all = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
            return e.kind == Element::Kind::kRule && nullable[static_cast<size_t>(e.value)];
          });
          if (all) {
            nullable[r] = true;
            changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<int32_t>> starts(n);  // rules that may come first in a rule
    for (size_t r = 0; r < n; ++r) {
      for (const auto& alt : rules_[r]) {
        for (const auto& e : alt) {
          if (e.kind != Element::Kind::kRule) break;
          starts[r].push_back(e.value);
          if (!nullable[static_cast<size_t>(e.value)]) break;
        }
      }
    }
    std::vector<int> mark(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<int32_t> path;
    std::function<Status(int32_t)> visit = [&](int32_t r) -> Status {
      mark[static_cast<size_t>(r)] = 1;
      path.push_back(r);
      for (int32_t s : starts[static_cast<size_t>(r)]) {
        if (mark[static_cast<size_t>(s)] == 1) {
          std::string cycle;
          auto from = std::find(path.begin(), path.end(), s);
          for (auto p = from; p != path.end(); ++p) cycle += names_[static_cast<size_t>(*p)] + " -> ";
          cycle += names_[static_cast<size_t>(s)];
          return InvalidArgument(
              "{}", fmt::format(
                        "left recursion ({}): a rule may not begin with itself; rewrite it right-recursively",
                        cycle));
        }
        if (mark[static_cast<size_t>(s)] == 0) FAK_RETURN_IF_ERROR(visit(s));
      }
      path.pop_back();
      mark[static_cast<size_t>(r)] = 2;
      return Status::Ok();
    };
    for (size_t r = 0; r < n; ++r) {
      if (mark[r] == 0) FAK_RETURN_IF_ERROR(visit(static_cast<int32_t>(r)));
    }
    return Status::Ok();
  }

  std::vector<std::vector<Seq>> rules_;
  std::vector<std::string> names_;
  std::vector<bool> defined_;
  std::vector<int> first_use_line_;
  std::map<std::string, int32_t> by_name_;
  std::vector<std::bitset<256>> sets_;
  std::map<std::string, int32_t> set_index_;
  std::map<std::string, Element> class_rule_;
  std::vector<Grammar::Run> runs_;
  std::map<int32_t, Grammar::Marker> chain_;  // chain rule -> its marker
  int helpers_ = 0;
  int line_ = 1;
};

namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

class Parser {
 public:
  Parser(std::string_view text, Builder* b) : s_(text), b_(b) {}

  Status Run() {
    SkipSpace();
    if (pos_ >= s_.size()) return InvalidArgument("{}", "the grammar is empty");
    while (pos_ < s_.size()) {
      const std::string name = Name();
      if (name.empty()) return Error("expected a rule name");
      SkipSpace();
      if (s_.compare(pos_, 3, "::=") != 0) return Error(fmt::format("expected '::=' after '{}'", name));
      pos_ += 3;
      const int32_t r = b_->Rule(name);
      if (b_->Defined(r)) return Error(fmt::format("rule '{}' is defined twice", name));
      auto alts = Alternatives(name, false);
      if (!alts.ok()) return alts.status();
      b_->Define(r, std::move(*alts));
      SkipSpace();
    }
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("{}", fmt::format("grammar line {}: {}", line_, what));
  }

  void SkipSpace() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        if (c == '\n') b_->set_line(++line_);
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string Name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && IsNameChar(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  // True when a new rule definition (`name ::=`) starts at the cursor.
  bool AtRuleStart() const {
    size_t p = pos_;
    while (p < s_.size() && IsNameChar(s_[p])) ++p;
    if (p == pos_) return false;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\r' || s_[p] == '\n')) ++p;
    return s_.compare(p, 3, "::=") == 0;
  }

  Result<std::vector<Seq>> Alternatives(const std::string& rule, bool nested) {
    if (nested && ++depth_ > 256) return Error("groups nest deeper than 256 levels");
    struct Leave {
      int* d;
      bool on;
      ~Leave() {
        if (on) --*d;
      }
    } leave{&depth_, nested};
    std::vector<Seq> alts;
    while (true) {
      auto seq = Sequence(rule, nested);
      if (!seq.ok()) return seq.status();
      alts.push_back(std::move(*seq));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return alts;
    }
  }

  Result<Seq> Sequence(const std::string& rule, bool nested) {
    Seq seq;
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] == '|' || s_[pos_] == ')') {
        if (pos_ < s_.size() && s_[pos_] == ')' && !nested) return Error("')' without '('");
        return seq;
      }
      if (!nested && AtRuleStart()) return seq;
      auto atom = Atom(rule);
      if (!atom.ok()) return atom.status();
      // Postfix repetition.
      int64_t min = 1, max = 1;
      if (pos_ < s_.size() && (s_[pos_] == '*' || s_[pos_] == '+' || s_[pos_] == '?')) {
        const char op = s_[pos_++];
        min = op == '+' ? 1 : 0;
        max = op == '?' ? 1 : -1;
      } else if (pos_ < s_.size() && s_[pos_] == '{') {
        ++pos_;
        auto a = Number();
        if (!a.ok()) return a.status();
        min = *a;
        max = *a;
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          if (pos_ < s_.size() && s_[pos_] == '}') {
            max = -1;
          } else {
            auto b = Number();
            if (!b.ok()) return b.status();
            max = *b;
          }
        }
        if (pos_ >= s_.size() || s_[pos_] != '}') return Error("expected '}' to close a repetition");
        ++pos_;
        if (max >= 0 && max < min)
          return Error(fmt::format("repetition {{{},{}}} has max below min", min, max));
      }
      if (min == 1 && max == 1) {
        seq.insert(seq.end(), atom->begin(), atom->end());
      } else {
        auto rep = b_->Repeat(*atom, min, max, rule);
        if (!rep.ok()) return rep.status();
        seq.insert(seq.end(), rep->begin(), rep->end());
      }
    }
  }

  Result<int64_t> Number() {
    SkipSpace();
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (pos_ - start > 9) return Error("repetition bound too large");
      v = v * 10 + (s_[pos_++] - '0');
    }
    if (pos_ == start) return Error("expected a number in a repetition");
    SkipSpace();
    return v;
  }

  Result<Seq> Atom(const std::string& rule) {
    const char c = s_[pos_];
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (true) {
        if (pos_ >= s_.size() || s_[pos_] == '\n') return Error("unterminated string literal");
        if (s_[pos_] == '"') {
          ++pos_;
          break;
        }
        auto cp = Char();
        if (!cp.ok()) return cp.status();
        AppendUtf8(*cp, &bytes);
      }
      Seq seq;
      for (unsigned char ch : bytes) {
        std::bitset<256> bs;
        bs.set(ch);
        seq.push_back(Builder::Bytes(b_->ByteSet(bs)));
      }
      return seq;
    }
    if (c == '[') {
      ++pos_;
      bool negate = false;
      if (pos_ < s_.size() && s_[pos_] == '^') {
        negate = true;
        ++pos_;
      }
      std::vector<Range> ranges;
      while (true) {
        if (pos_ >= s_.size() || s_[pos_] == '\n') return Error("unterminated character class");
        if (s_[pos_] == ']') {
          ++pos_;
          break;
        }
        auto a = Char();
        if (!a.ok()) return a.status();
        uint32_t hi = *a;
        if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
          ++pos_;
          auto b = Char();
          if (!b.ok()) return b.status();
          hi = *b;
          if (hi < *a) return Error("character range with its end before its start");
        }
        ranges.emplace_back(*a, hi);
      }
      auto norm = Normalize(std::move(ranges), negate);
      if (norm.empty()) return Error("a character class that matches nothing");
      return Seq{b_->Class(norm, rule)};
    }
    if (c == '.') {
      ++pos_;
      return Seq{b_->Class(Normalize({}, true), rule)};
    }
    if (c == '(') {
      ++pos_;
      auto alts = Alternatives(rule, true);
      if (!alts.ok()) return alts.status();
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ')') return Error("expected ')'");
      ++pos_;
      if (alts->size() == 1) return std::move((*alts)[0]);
      const int32_t r = b_->Helper(rule + "_group");
      b_->Define(r, std::move(*alts));
      return Seq{Builder::Ref(r)};
    }
    if (IsNameChar(c)) {
      const std::string name = Name();
      return Seq{Builder::Ref(b_->Rule(name))};
    }
    return Error(fmt::format("unexpected character '{}'", c));
  }

  // One character of a literal or class, escapes decoded, UTF-8 read as a code point.
  Result<uint32_t> Char() {
    const auto c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      if (pos_ + 1 >= s_.size()) return Error("a backslash at the end");
      const char e = s_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case 'n': return 0x0Au;
        case 'r': return 0x0Du;
        case 't': return 0x09u;
        case '0': return 0x00u;
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '.': return static_cast<uint32_t>(e);
        case 'x': return Hex(2);
        case 'u': return Hex(4);
        case 'U': return Hex(8);
        default: return Error(fmt::format("unknown escape '\\{}'", e));
      }
    }
    if (ValidUtf8PrefixLength(s_.substr(pos_, 4)) == 0) return Error("invalid UTF-8 in the grammar");
    const uint32_t cp = DecodeUtf8(s_, &pos_);
    return cp;
  }

  Result<uint32_t> Hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= s_.size()) return Error("a short hex escape");
      const char h = s_[pos_++];
      int d = h >= '0' && h <= '9'   ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                     : -1;
      if (d < 0) return Error("a bad hex digit in an escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > kMaxCodePoint) return Error("an escape beyond U+10FFFF");
    return v;
  }

  std::string_view s_;
  Builder* b_;
  size_t pos_ = 0;
  int line_ = 1;
  int depth_ = 0;
};

}  // namespace

Result<Grammar> Grammar::Parse(std::string_view text, std::string_view root) {
  Builder b;
  Parser p(text, &b);
  FAK_RETURN_IF_ERROR(p.Run());
  return b.Finish(root);
}

void AppendLiteral(std::string* out, std::string_view s) {
  out->push_back('"');
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (c == '\t') {
      *out += "\\t";
    } else if (c < 0x20) {
      *out += fmt::format("\\x{:02x}", c);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

}  // namespace fak::grammar
