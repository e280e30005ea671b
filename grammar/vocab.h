// A model's vocabulary as the grammar matcher sees it, and compiled grammars cached by their text.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace fak::grammar {

// The byte trie of a tokenizer's vocabulary: each token's bytes as decoded text (control tokens and
// tokens without bytes are never allowed); `eos` are the tokens that end generation.
std::shared_ptr<const TokenTrie> BuildTokenTrie(const Tokenizer& tokenizer, const std::vector<int64_t>& eos);

// Compiles grammar text into an automaton over `trie`, reusing the automaton (and every mask it has
// computed) when the same text comes again. Thread-safe; keeps the last `capacity` grammars.
class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenTrie> trie, size_t capacity = 32)
      : trie_(std::move(trie)), capacity_(capacity) {}

  Result<std::shared_ptr<Automaton>> Get(const std::string& grammar_text);
  const std::shared_ptr<const TokenTrie>& trie() const { return trie_; }

 private:
  std::shared_ptr<const TokenTrie> trie_;
  size_t capacity_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<Automaton>>> lru_;  // most recent first
};

}  // namespace fak::grammar
