#include "grammar/matcher.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

namespace fak::grammar {

namespace {

constexpr size_t kMaxStackDepth = 512;           // deeper nesting is refused
constexpr int64_t kMaxStates = 200'000;          // beyond this a transition is refused (1 KiB each)
constexpr size_t kMaxStacks = 4096;              // stacks in one state (an ambiguous grammar)
constexpr int64_t kMaskCacheBytes = 64ll << 20;  // cached masks beyond this are dropped (per grammar)

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
  std::vector<Stack> out;
  std::set<Stack> seen;
  for (int32_t alt : g_->alternatives(g_->root())) Expand(Stack{alt}, &out, &seen);
  std::lock_guard<std::mutex> lock(mu_);
  start_ = Intern(std::move(out));
}

void Automaton::Expand(Stack stack, std::vector<Stack>* out, std::set<Stack>* seen) const {
  const auto& el = g_->elements();
  while (true) {
    if (stack.size() > kMaxStackDepth) return;
    if (!seen->insert(stack).second) return;
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
  if (static_cast<int64_t>(states_.size()) >= kMaxStates || stacks.size() > kMaxStacks) {
    overflow_ = true;
    return -1;
  }
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
    std::vector<Stack> out;
    std::set<Stack> seen;
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
  s.overflow = overflow_;
  s.states = static_cast<int64_t>(states_.size());
  return s;
}

int64_t Automaton::state_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(states_.size());
}

void Automaton::WalkTrie(int32_t state, const TokenTrie& t, uint64_t* bits) {
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
}

void Automaton::WalkMask(int32_t state, TokenMask* mask) {
  const TokenTrie& t = *trie_;
  mask->assign((static_cast<size_t>(t.vocab_size_) + 63) / 64, 0);
  if (!FastMask(state, mask)) WalkTrie(state, t, mask->data());
  if (states_[static_cast<size_t>(state)].accepting) {
    uint64_t* bits = mask->data();
    for (int32_t id : t.eos_) {
      if (id >= 0 && id < t.vocab_size_) bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }
}

Automaton::RunTable* Automaton::Table(int32_t run) {
  // The table depends on X alone: runs of the same X (every string of a schema) share one.
  const Grammar::Run& r = g_->runs()[static_cast<size_t>(run)];
  auto& slot = runs_[r.x_rule];
  if (slot) return slot.get();
  slot = std::make_unique<RunTable>();
  RunTable& rt = *slot;
  std::vector<Stack> out;
  std::set<Stack> seen;
  for (int32_t alt : g_->alternatives(r.star_rule)) Expand(Stack{alt}, &out, &seen);
  rt.start = Intern(out);
  if (rt.start < 0) return slot.get();
  const State& b = states_[static_cast<size_t>(rt.start)];
  for (const auto& st : b.stacks) {
    if (st.empty()) continue;
    rt.tails.emplace_back(st.begin() + 1, st.end());  // st[0]: the position after X in `X star`
  }
  rt.xfirst = b.first;
  // One walk from the boundary of X*: per token, the X it begins (a byte read at the boundary
  // begins one) or, when X* refuses one of its bytes, a place in the leaving trie.
  const TokenTrie& t = *trie_;
  std::vector<int16_t> begins(static_cast<size_t>(t.vocab_size_), -1);
  std::vector<std::string> leaving(static_cast<size_t>(t.vocab_size_));
  int64_t n_leaving = 0;
  std::array<int32_t, 256> count{};
  walk_[0] = rt.start;
  bool ambiguous = false;
  const auto n = static_cast<int32_t>(t.nodes_.size());
  for (int32_t i = 0; i < n;) {
    const TokenTrie::Node node = t.nodes_[static_cast<size_t>(i)];
    const int32_t from = walk_[node.depth - 1u];
    const int32_t s = Next(from, node.byte);
    if (s < 0) {
      for (int32_t k = t.tok_begin_[static_cast<size_t>(i)]; k < t.tok_begin_[static_cast<size_t>(node.skip)];
           ++k) {
        const int32_t id = t.tok_ids_[static_cast<size_t>(k)];
        leaving[static_cast<size_t>(id)] = t.pieces_[static_cast<size_t>(id)];
        ++n_leaving;
      }
      i = node.skip;
      continue;
    }
    // An X that may end where another begins (X = "a" | "ab") makes the count ambiguous.
    if (s != rt.start && states_[static_cast<size_t>(s)].accepting) ambiguous = true;
    walk_[node.depth] = s;
    count[node.depth] = count[node.depth - 1u] + (from == rt.start ? 1 : 0);
    for (int32_t k = t.tok_begin_[static_cast<size_t>(i)]; k < t.tok_begin_[static_cast<size_t>(i) + 1];
         ++k) {
      begins[static_cast<size_t>(t.tok_ids_[static_cast<size_t>(k)])] =
          static_cast<int16_t>(count[node.depth]);
    }
    ++i;
  }
  // Worth it when most tokens stay inside (a string's characters), not when most leave.
  rt.usable = !ambiguous && n_leaving < t.vocab_size_ / 4;
  if (!rt.usable) return slot.get();
  rt.leaving = std::make_unique<TokenTrie>(leaving, std::vector<int32_t>{});
  // Masks by the most X a token may begin: within[r] holds the tokens that begin r or fewer.
  int16_t most = 0;
  for (int16_t b : begins) most = std::max(most, b);
  const size_t words = (static_cast<size_t>(t.vocab_size_) + 63) / 64;
  rt.within.assign(static_cast<size_t>(most) + 1, TokenMask(words, 0));
  for (size_t id = 0; id < begins.size(); ++id) {
    if (begins[id] >= 0) rt.within[static_cast<size_t>(begins[id])][id >> 6] |= uint64_t{1} << (id & 63);
  }
  for (size_t r = 1; r < rt.within.size(); ++r) {
    for (size_t w = 0; w < words; ++w) rt.within[r][w] |= rt.within[r - 1][w];
  }
  return slot.get();
}

bool Automaton::FastMask(int32_t state, TokenMask* mask) {
  if (g_->runs().empty()) return false;
  const State& st = states_[static_cast<size_t>(state)];
  int32_t run = -1, remaining = -1;
  std::vector<Stack> prefixes;  // below the marker, one per group stack
  std::array<bool, 256> other_first{};
  const auto& el = g_->elements();
  std::vector<const Stack*> group;
  for (const auto& s : st.stacks) {
    int32_t at = -1;
    for (size_t i = s.size(); i-- > 0;) {
      if (g_->marker(s[i]).run >= 0) {
        at = static_cast<int32_t>(i);
        break;
      }
    }
    if (at < 0) {
      if (!s.empty()) {
        const auto& bs = g_->byte_set(el[static_cast<size_t>(s.back())].value);
        for (int b = 0; b < 256; ++b) other_first[static_cast<size_t>(b)] |= bs[static_cast<size_t>(b)];
      }
      continue;
    }
    const Grammar::Marker m = g_->marker(s[static_cast<size_t>(at)]);
    if (run >= 0 && (m.run != run || m.remaining != remaining)) return false;
    run = m.run;
    remaining = m.remaining;
    group.push_back(&s);
    (void)at;
  }
  if (run < 0) return false;
  RunTable* rt = Table(run);
  if (!rt->usable) return false;
  // Every group stack is a fresh X above its marker, each prefix with every tail.
  std::vector<Stack> seen_prefix;
  std::vector<int> tails_of;
  for (const Stack* s : group) {
    size_t at = s->size();
    while (at-- > 0 && g_->marker((*s)[at]).run < 0) {
    }
    const Stack tail(s->begin() + static_cast<long>(at) + 1, s->end());
    if (std::find(rt->tails.begin(), rt->tails.end(), tail) == rt->tails.end()) return false;
    const Stack prefix(s->begin(), s->begin() + static_cast<long>(at));
    auto it = std::find(seen_prefix.begin(), seen_prefix.end(), prefix);
    if (it == seen_prefix.end()) {
      seen_prefix.push_back(prefix);
      tails_of.push_back(1);
    } else {
      ++tails_of[static_cast<size_t>(it - seen_prefix.begin())];
    }
  }
  for (int c : tails_of) {
    if (static_cast<size_t>(c) != rt->tails.size()) return false;
  }
  // What follows the run (and the other stacks) must not begin like an X: then a token's bytes that
  // X* accepts can only be read by the run.
  for (const auto& prefix : seen_prefix) {
    std::vector<Stack> out;
    std::set<Stack> seen;
    Expand(prefix, &out, &seen);
    for (const auto& s : out) {
      if (s.empty()) continue;
      const auto& bs = g_->byte_set(el[static_cast<size_t>(s.back())].value);
      for (int b = 0; b < 256; ++b) other_first[static_cast<size_t>(b)] |= bs[static_cast<size_t>(b)];
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (other_first[static_cast<size_t>(b)] && rt->xfirst[static_cast<size_t>(b)]) return false;
  }
  *mask = rt->within[std::min(static_cast<size_t>(remaining), rt->within.size() - 1)];
  WalkTrie(state, *rt->leaving, mask->data());
  ++stats_.masks_by_run;
  return true;
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
