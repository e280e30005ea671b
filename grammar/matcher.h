// Token masks from a grammar: which tokens of a vocabulary may come next.
//
// The grammar runs as a pushdown automaton over bytes whose configurations (sets of stacks) are
// interned into numbered states, with transitions filled in as they are first taken. A token mask is
// one walk over the vocabulary's byte trie from a state, skipping every subtree whose first byte the
// grammar refuses; masks are cached per state, so a state the generation comes back to (inside a
// string, between digits) costs one walk per grammar, never one per step. Nothing ever tries the
// vocabulary token by token from scratch.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"

namespace fak::grammar {

// The vocabulary as a byte trie laid out in preorder: a node's subtree is the range that follows it.
class TokenTrie {
 public:
  // `pieces[i]`: the bytes token i contributes to text; empty for tokens the grammar never allows
  // (control tokens). Pieces longer than 255 bytes are never allowed either. `eos`: the tokens that end
  // generation, allowed when the grammar is complete.
  TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> eos);

  int32_t vocab_size() const { return vocab_size_; }
  const std::vector<int32_t>& eos() const { return eos_; }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }

 private:
  friend class Automaton;
  int32_t vocab_size_ = 0;
  std::vector<int32_t> eos_;
  std::vector<std::string> pieces_;
  struct Node {
    uint8_t byte;   // the byte on the edge into it
    uint8_t depth;  // 1 for children of the root (pieces are at most 255 bytes)
    int32_t skip;   // the index after its subtree
  };
  std::vector<Node> nodes_;         // preorder
  std::vector<int32_t> tok_begin_;  // per node: tokens ending here, a range of tok_ids_ (size nodes+1)
  std::vector<int32_t> tok_ids_;
};

// A bit per vocabulary entry.
using TokenMask = std::vector<uint64_t>;

inline bool MaskAllows(const TokenMask& m, int32_t id) {
  return ((m[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1) != 0;
}

// The interned states of one grammar over one vocabulary, shared by every request that uses the
// grammar (a fleet sends the same schema many times). Thread-safe: calls lock a mutex.
class Automaton {
 public:
  Automaton(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie);

  int32_t start() const { return start_; }
  // The state after `bytes` from `state`; -1 when the grammar refuses them.
  int32_t Advance(int32_t state, std::string_view bytes);
  // The tokens allowed in `state` (EOS ones when the grammar may end there).
  std::shared_ptr<const TokenMask> Mask(int32_t state);
  // True when the grammar may end in `state`; `can_continue` whether any byte may follow.
  bool Accepting(int32_t state);
  bool CanContinue(int32_t state);

  const TokenTrie& trie() const { return *trie_; }
  int64_t state_count();

  struct Stats {
    int64_t states = 0;
    int64_t masks_computed = 0;  // trie walks (cache misses)
    int64_t masks_served = 0;    // Mask calls
    int64_t masks_by_run = 0;    // masks from a counted run's token table instead of a full walk
    double walk_seconds = 0;     // all walks together
    double max_walk_seconds = 0;
    bool overflow = false;  // a state grew past the limits (too many states, or stacks in one)
  };
  Stats stats();
  bool overflowed() const { return overflow_.load(); }

 private:
  struct State {
    std::vector<std::vector<int32_t>> stacks;  // sorted; tops are byte-set elements (or empty: done)
    bool accepting = false;
    std::array<bool, 256> first{};  // bytes some stack accepts
  };
  using Stack = std::vector<int32_t>;
  // A counted run's token table (grammar.h): what each token does from a boundary of X*.
  struct RunTable {
    bool usable = false;
    int32_t start = -1;                  // X* between two X
    std::vector<Stack> tails;            // the stack tops of a fresh X, above the marker
    std::array<bool, 256> xfirst{};      // bytes that may begin an X
    std::vector<TokenMask> within;       // [r]: the tokens staying inside X* that begin at most r X
    std::unique_ptr<TokenTrie> leaving;  // the tokens X* refuses somewhere, checked exactly
  };
  RunTable* Table(int32_t run);                                      // mu_ held
  bool FastMask(int32_t state, TokenMask* mask);                     // mu_ held; false: not at a run boundary
  void WalkTrie(int32_t state, const TokenTrie& t, uint64_t* bits);  // mu_ held
  int32_t Intern(std::vector<Stack> stacks);
  int32_t Next(int32_t state, uint8_t byte);  // mu_ held
  void Expand(Stack stack, std::vector<Stack>* out, std::set<Stack>* seen) const;
  void WalkMask(int32_t state, TokenMask* mask);  // mu_ held

  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const TokenTrie> trie_;
  std::mutex mu_;
  std::vector<State> states_;
  std::vector<int32_t> next_;  // [state * 256 + byte]: -2 not computed yet, -1 refused
  std::unordered_map<std::string, int32_t> index_;
  std::unordered_map<int32_t, std::shared_ptr<const TokenMask>> masks_;
  int64_t mask_bytes_ = 0;
  std::atomic<bool> overflow_{false};
  Stats stats_;
  std::array<int32_t, 256> walk_{};                              // per depth: the state during a trie walk
  std::unordered_map<int32_t, std::unique_ptr<RunTable>> runs_;  // by the repeated rule X
  int32_t start_ = -1;
};

// One request's position in its grammar.
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<Automaton> automaton) : a_(std::move(automaton)), state_(a_->start()) {}

  // Sets logits of tokens the grammar refuses to -infinity.
  void Apply(std::span<float> logits);
  // Moves past a chosen token; false when the grammar refuses it (the state is unchanged).
  bool Accept(int32_t token);
  // Moves past text; false when the grammar refuses it (the state is unchanged).
  bool AcceptBytes(std::string_view bytes);
  bool Accepting() const { return a_->Accepting(state_); }
  bool CanContinue() const { return a_->CanContinue(state_); }
  const Automaton& automaton() const { return *a_; }

 private:
  std::shared_ptr<Automaton> a_;
  int32_t state_;
};

}  // namespace fak::grammar
