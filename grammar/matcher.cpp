#include "grammar/matcher.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

namespace fak::grammar {

namespace {

constexpr size_t kMaxStackDepth = 512;            // deeper nesting is refused
constexpr int64_t kMaxStates = 2'000'000;         // beyond this a transition is refused
constexpr int64_t kMaskCacheBytes = 512ll << 20;  // cached masks beyond this are dropped

}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> eos)
    : vocab_size_(static_cast<int32_t>(pieces.size())), eos_(std::move(eos)), pieces_(pieces) {
  std::vector<int32_t> order;
  for (int32_t i = 0; i < vocab_size_; ++i) {
    const size_t len = pieces_[static_cast<size_t>(i)].size();
    if (len > 0 && len <= 255) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const auto& pa = pieces_[static_cast<size_t>(a)];
    const auto& pb = pieces_[static_cast<size_t>(b)];
    return pa != pb ? pa < pb : a < b;
  });
  std::vector<int32_t> path;  // node per depth of the current prefix
  std::string prefix;
  auto close = [&](size_t depth) {
    while (path.size() > depth) {
      nodes_[static_cast<size_t>(path.back())].skip = static_cast<int32_t>(nodes_.size());
      path.pop_back();
      prefix.pop_back();
    }
  };
  for (int32_t id : order) {
    const std::string& p = pieces_[static_cast<size_t>(id)];
    size_t lcp = 0;
    while (lcp < p.size() && lcp < prefix.size() && p[lcp] == prefix[lcp]) ++lcp;
    close(lcp);
    for (size_t k = lcp; k < p.size(); ++k) {
      path.push_back(static_cast<int32_t>(nodes_.size()));
      prefix.push_back(p[k]);
      nodes_.push_back({static_cast<uint8_t>(p[k]), static_cast<uint8_t>(k + 1), 0});
      tok_begin_.push_back(static_cast<int32_t>(tok_ids_.size()));
    }
    tok_ids_.push_back(id);
  }
  close(0);
  tok_begin_.push_back(static_cast<int32_t>(tok_ids_.size()));
}

Automaton::Automaton(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie)
    : g_(std::move(grammar)), trie_(std::move(trie)) {
  std::vector<Stack> out, seen;
  for (int32_t alt : g_->alternatives(g_->root())) Expand(Stack{alt}, &out, &seen);
  std::lock_guard<std::mutex> lock(mu_);
  start_ = Intern(std::move(out));
}

void Automaton::Expand(Stack stack, std::vector<Stack>* out, std::vector<Stack>* seen) const {
  const auto& el = g_->elements();
  while (true) {
    if (stack.size() > kMaxStackDepth) return;
    if (std::find(seen->begin(), seen->end(), stack) != seen->end()) return;
    seen->push_back(stack);
    if (stack.empty()) {
      out->push_back(stack);
      return;
    }
    const int32_t p = stack.back();
    const Element& e = el[static_cast<size_t>(p)];
    if (e.kind == Element::Kind::kBytes) {
      out->push_back(std::move(stack));
      return;
    }
    stack.pop_back();
    if (e.kind == Element::Kind::kEnd) continue;  // the alternative is done: return to the caller
    // A rule reference: continue after it once the rule is done (nothing to come back to when the
    // reference is the last element, which keeps right recursion flat).
    if (el[static_cast<size_t>(p) + 1].kind != Element::Kind::kEnd) stack.push_back(p + 1);
    const auto& alts = g_->alternatives(e.value);
    for (size_t i = 0; i + 1 < alts.size(); ++i) {
      Stack s = stack;
      s.push_back(alts[i]);
      Expand(std::move(s), out, seen);
    }
    stack.push_back(alts.back());
  }
}

int32_t Automaton::Intern(std::vector<Stack> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  std::string key;
  for (const auto& s : stacks) {
    key.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(int32_t));
    key.append(4, '\xff');
  }
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  if (static_cast<int64_t>(states_.size()) >= kMaxStates) return -1;
  State st;
  const auto& el = g_->elements();
  for (const auto& s : stacks) {
    if (s.empty()) {
      st.accepting = true;
      continue;
    }
    const auto& bs = g_->byte_set(el[static_cast<size_t>(s.back())].value);
    for (int b = 0; b < 256; ++b) st.first[static_cast<size_t>(b)] |= bs[static_cast<size_t>(b)];
  }
  st.stacks = std::move(stacks);
  const auto id = static_cast<int32_t>(states_.size());
  states_.push_back(std::move(st));
  next_.resize(next_.size() + 256, -2);
  index_.emplace(std::move(key), id);
  return id;
}

int32_t Automaton::Next(int32_t state, uint8_t byte) {
  const size_t at = static_cast<size_t>(state) * 256 + byte;
  if (next_[at] != -2) return next_[at];
  int32_t result = -1;
  if (states_[static_cast<size_t>(state)].first[byte]) {
    const auto& el = g_->elements();
    std::vector<Stack> out, seen;
    for (const auto& s : states_[static_cast<size_t>(state)].stacks) {
      if (s.empty() || !g_->byte_set(el[static_cast<size_t>(s.back())].value)[byte]) continue;
      Stack t = s;
      t.back() += 1;
      Expand(std::move(t), &out, &seen);
    }
    if (!out.empty()) result = Intern(std::move(out));
  }
  next_[at] = result;  // after Intern, which may have moved next_
  return result;
}

int32_t Automaton::Advance(int32_t state, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  for (char c : bytes) {
    if (state < 0) return -1;
    state = Next(state, static_cast<uint8_t>(c));
  }
  return state;
}

bool Automaton::Accepting(int32_t state) {
  std::lock_guard<std::mutex> lock(mu_);
  return states_[static_cast<size_t>(state)].accepting;
}

bool Automaton::CanContinue(int32_t state) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto& f = states_[static_cast<size_t>(state)].first;
  return std::any_of(f.begin(), f.end(), [](bool b) { return b; });
}

Automaton::Stats Automaton::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.states = static_cast<int64_t>(states_.size());
  return s;
}

int64_t Automaton::state_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(states_.size());
}

void Automaton::WalkMask(int32_t state, TokenMask* mask) {
  const TokenTrie& t = *trie_;
  mask->assign((static_cast<size_t>(t.vocab_size_) + 63) / 64, 0);
  uint64_t* bits = mask->data();
  walk_[0] = state;
  const TokenTrie::Node* nodes = t.nodes_.data();
  const int32_t* tok_begin = t.tok_begin_.data();
  const int32_t* tok_ids = t.tok_ids_.data();
  const auto n = static_cast<int32_t>(t.nodes_.size());
  for (int32_t i = 0; i < n;) {
    const TokenTrie::Node node = nodes[i];
    const int32_t from = walk_[node.depth - 1u];
    int32_t s = next_[static_cast<size_t>(from) * 256 + node.byte];
    if (s == -2) s = Next(from, node.byte);  // a transition not taken before
    if (s < 0) {
      i = node.skip;
      continue;
    }
    walk_[node.depth] = s;
    for (int32_t k = tok_begin[i], end = tok_begin[i + 1]; k < end; ++k) {
      const int32_t id = tok_ids[k];
      bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
  if (states_[static_cast<size_t>(state)].accepting) {
    for (int32_t id : t.eos_) {
      if (id >= 0 && id < t.vocab_size_) bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }
}

std::shared_ptr<const TokenMask> Automaton::Mask(int32_t state) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.masks_served;
  if (auto it = masks_.find(state); it != masks_.end()) return it->second;
  auto m = std::make_shared<TokenMask>();
  const auto t0 = std::chrono::steady_clock::now();
  WalkMask(state, m.get());
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.masks_computed;
  stats_.walk_seconds += dt;
  stats_.max_walk_seconds = std::max(stats_.max_walk_seconds, dt);
  const auto bytes = static_cast<int64_t>(m->size() * sizeof(uint64_t));
  if (mask_bytes_ + bytes > kMaskCacheBytes) {
    masks_.clear();
    mask_bytes_ = 0;
  }
  masks_.emplace(state, m);
  mask_bytes_ += bytes;
  return m;
}

void Matcher::Apply(std::span<float> logits) {
  const auto mask = a_->Mask(state_);
  const auto vocab = static_cast<size_t>(a_->trie().vocab_size());
  const float ninf = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), vocab);
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t bits = (*mask)[w];
    if (bits == ~uint64_t{0}) continue;
    const size_t end = std::min(n, w * 64 + 64);
    for (size_t i = w * 64; i < end; ++i) {
      if (((bits >> (i & 63)) & 1) == 0) logits[i] = ninf;
    }
  }
  for (size_t i = n; i < logits.size(); ++i) logits[i] = ninf;
}

bool Matcher::AcceptBytes(std::string_view bytes) {
  const int32_t s = a_->Advance(state_, bytes);
  if (s < 0) return false;
  state_ = s;
  return true;
}

bool Matcher::Accept(int32_t token) {
  const TokenTrie& t = a_->trie();
  if (token < 0 || token >= t.vocab_size()) return false;
  if (std::find(t.eos().begin(), t.eos().end(), token) != t.eos().end()) return a_->Accepting(state_);
  const std::string& piece = t.piece(token);
  if (piece.empty()) return false;
  const int32_t s = a_->Advance(state_, piece);
  if (s < 0) return false;
  state_ = s;
  return true;
}

}  // namespace fak::grammar
