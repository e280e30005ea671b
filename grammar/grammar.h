// Grammars that constrain generated text: a context-free grammar over bytes, written in a GBNF-style
// text format (docs/grammar.md) or produced from a JSON schema (json_schema.h).
//
// A grammar is a list of rules; each rule is a list of alternatives; each alternative is a sequence
// of elements, and an element is a byte set (one byte from the set) or a reference to a rule. Character
// classes over Unicode code points are lowered to alternatives of UTF-8 byte sequences, so matching
// works on the bytes a token contributes and a token may end in the middle of a character. Repetition
// (`*`, `+`, `?`, `{m,n}`) and groups are lowered to helper rules. Left recursion is refused (the
// matcher would never terminate on it); right recursion and nesting are fine.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace fak::grammar {

struct Element {
  enum class Kind : uint8_t { kEnd, kBytes, kRule };
  Kind kind = Kind::kEnd;
  int32_t value = 0;  // kBytes: index into byte_sets(); kRule: the rule's index
};

class Grammar {
 public:
  // Parses grammar text. `root` names the start rule. InvalidArgument names the line and the problem
  // (an undefined rule, left recursion, a bad escape, a repetition bound out of range).
  static Result<Grammar> Parse(std::string_view text, std::string_view root = "root");

  // All alternatives' element sequences laid out one after another, each closed by a kEnd element.
  const std::vector<Element>& elements() const { return elements_; }
  // The position in elements() where each alternative of rule `r` begins.
  const std::vector<int32_t>& alternatives(int32_t r) const { return rules_[static_cast<size_t>(r)].alts; }
  const std::bitset<256>& byte_set(int32_t i) const { return byte_sets_[static_cast<size_t>(i)]; }
  const std::string& rule_name(int32_t r) const { return rules_[static_cast<size_t>(r)].name; }
  int32_t root() const { return root_; }
  int32_t rule_count() const { return static_cast<int32_t>(rules_.size()); }

  // Counted runs: a bounded repetition X{m,n} (n >= 8) is a chain of rules, one per count, each
  // `X next | ""`; the position right after X in a chain rule is its marker, naming the run and how
  // many X may still come (X included). Token masks inside a run use the run's token table instead
  // of walking the vocabulary once per count (matcher.cpp).
  struct Run {
    int32_t x_rule;     // the repeated rule
    int32_t star_rule;  // X* (`X star | ""`), from which the token table is walked
  };
  struct Marker {
    int32_t run = -1;  // -1: not a marker
    int32_t remaining = 0;
  };
  const std::vector<Run>& runs() const { return runs_; }
  Marker marker(int32_t pos) const {
    auto it = markers_.find(pos);
    return it == markers_.end() ? Marker{} : it->second;
  }

 private:
  friend class Builder;
  struct Rule {
    std::string name;
    std::vector<int32_t> alts;
  };
  std::vector<Rule> rules_;
  std::vector<Element> elements_;
  std::vector<std::bitset<256>> byte_sets_;
  std::vector<Run> runs_;
  std::unordered_map<int32_t, Marker> markers_;  // by element position
  int32_t root_ = 0;
};

// Appends `s` as a grammar string literal (quoted, with escapes for quote, backslash and control
// bytes); JSON-schema lowering uses it.
void AppendLiteral(std::string* out, std::string_view s);

}  // namespace fak::grammar
