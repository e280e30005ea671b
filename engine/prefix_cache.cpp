#include "engine/prefix_cache.h"

#include <algorithm>

namespace fak {

struct PrefixCache::Node {
  std::vector<int32_t> edge;  // the tokens from the parent to this node
  Node* parent = nullptr;
  int64_t depth = 0;  // tokens from the root to the end of this node
  std::map<int32_t, std::unique_ptr<Node>> children;
  std::unique_ptr<SequenceSnapshot> snap;  // an entry ends here
  bool pinned = false;
  uint64_t used = 0;
};

PrefixCache::PrefixCache(Runtime& runtime) : rt_(runtime), root_(std::make_unique<Node>()) {}

PrefixCache::~PrefixCache() = default;

int64_t PrefixCache::SharedLength(std::span<const int32_t> tokens, int64_t max_tokens) const {
  const int64_t limit = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size()));
  const Node* node = root_.get();
  int64_t i = 0;
  while (i < limit) {
    auto it = node->children.find(tokens[static_cast<size_t>(i)]);
    if (it == node->children.end()) break;
    const Node* child = it->second.get();
    const int64_t edge = static_cast<int64_t>(child->edge.size());
    int64_t k = 0;
    while (k < edge && i + k < limit &&
           child->edge[static_cast<size_t>(k)] == tokens[static_cast<size_t>(i + k)]) {
      ++k;
    }
    i += k;
    if (k < edge) break;
    node = child;
  }
  return i;
}

PrefixCache::Node* PrefixCache::Walk(std::span<const int32_t> tokens, int64_t max_tokens,
                                     int64_t* matched) const {
  const int64_t limit = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size()));
  const bool exact_only = rt_.state_bytes() > 0;
  Node* node = root_.get();
  Node* exact = nullptr;  // the deepest entry on the path that ends within the match
  int64_t i = 0;
  while (i < limit) {
    auto it = node->children.find(tokens[static_cast<size_t>(i)]);
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    int64_t k = 0;
    const int64_t edge = static_cast<int64_t>(child->edge.size());
    while (k < edge && i + k < limit &&
           child->edge[static_cast<size_t>(k)] == tokens[static_cast<size_t>(i + k)]) {
      ++k;
    }
    i += k;
    node = child;
    if (k < edge) break;
    if (child->snap) exact = child;
  }
  if (exact_only) {
    *matched = exact != nullptr ? exact->depth : 0;
    return exact;
  }
  *matched = i;
  return i > 0 ? node : nullptr;
}

PrefixCache::Node* PrefixCache::AnyEntryBelow(Node* n) const {
  // Every node but the root has an entry in its subtree (empty leaves are pruned).
  while (!n->snap && !n->children.empty()) n = n->children.begin()->second.get();
  return n->snap ? n : nullptr;
}

int64_t PrefixCache::MatchLength(std::span<const int32_t> tokens, int64_t max_tokens) const {
  int64_t matched = 0;
  Walk(tokens, max_tokens, &matched);
  return matched;
}

int64_t PrefixCache::Restore(std::span<const int32_t> tokens, int64_t max_tokens, Sequence& seq) {
  seq.Truncate(0);
  int64_t matched = 0;
  Node* node = Walk(tokens, max_tokens, &matched);
  if (node == nullptr || matched == 0) return 0;
  Node* entry = AnyEntryBelow(node);
  if (entry == nullptr) return 0;
  rt_.Restore(seq, *entry->snap);
  seq.Truncate(matched);
  entry->used = ++clock_;
  return matched;
}

void PrefixCache::RecordLookup(int64_t asked, int64_t hit) {
  ++stats_.lookups;
  stats_.lookup_tokens += asked;
  stats_.hit_tokens += hit;
}

Status PrefixCache::Insert(const Sequence& seq, bool pinned) {
  const std::vector<int32_t>& t = seq.tokens();
  const int64_t n = static_cast<int64_t>(t.size());
  if (n == 0) return Status::Ok();
  // A snapshot of a recurrent model takes a state slot: when they are used up, the least recently
  // used unpinned entry gives its slot (before the tree is touched, so eviction cannot prune the path).
  while (rt_.state_bytes() > 0 && rt_.free_state_slots() == 0 && MatchLength(t, n) < n) {
    Node* victim = nullptr;
    for (Node* e : entries_) {
      if (!e->pinned && (victim == nullptr || e->used < victim->used)) victim = e;
    }
    if (victim == nullptr) break;
    Evict(victim);
    ++stats_.evictions;
  }
  Node* node = root_.get();
  int64_t i = 0;
  while (i < n) {
    auto it = node->children.find(t[static_cast<size_t>(i)]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->edge.assign(t.begin() + i, t.end());
      leaf->parent = node;
      leaf->depth = n;
      Node* raw = leaf.get();
      node->children.emplace(t[static_cast<size_t>(i)], std::move(leaf));
      node = raw;
      break;
    }
    Node* child = it->second.get();
    const int64_t edge = static_cast<int64_t>(child->edge.size());
    int64_t k = 0;
    while (k < edge && i + k < n && child->edge[static_cast<size_t>(k)] == t[static_cast<size_t>(i + k)]) ++k;
    if (k == edge) {
      node = child;
      i += k;
      continue;
    }
    // Split the edge after k tokens: a new node takes the first k, the old child hangs below it.
    auto mid = std::make_unique<Node>();
    mid->edge.assign(child->edge.begin(), child->edge.begin() + k);
    mid->parent = node;
    mid->depth = node->depth + k;
    std::unique_ptr<Node> old = std::move(it->second);
    old->edge.erase(old->edge.begin(), old->edge.begin() + k);
    old->parent = mid.get();
    mid->children.emplace(old->edge.front(), std::move(old));
    Node* raw = mid.get();
    it->second = std::move(mid);
    node = raw;
    i += k;
  }
  node->used = ++clock_;
  if (node->snap) {
    if (pinned && !node->pinned) {
      node->pinned = true;
      ++stats_.pinned_entries;
      stats_.pinned_tokens += node->depth;
    }
    return Status::Ok();
  }
  auto snap = rt_.Snapshot(seq);
  if (!snap.ok()) {
    // Leave the tree as it was: a node with neither entry nor children goes.
    if (node->children.empty()) Evict(node);
    return snap.status();
  }
  node->snap = std::move(*snap);
  node->pinned = pinned;
  entries_.push_back(node);
  ++stats_.entries;
  if (pinned) {
    ++stats_.pinned_entries;
    stats_.pinned_tokens += node->depth;
  }
  return Status::Ok();
}

void PrefixCache::Evict(Node* n) {
  if (n->snap) {
    n->snap.reset();
    entries_.erase(std::find(entries_.begin(), entries_.end(), n));
    --stats_.entries;
    if (n->pinned) {
      --stats_.pinned_entries;
      stats_.pinned_tokens -= n->depth;
    }
    n->pinned = false;
  }
  // Prune nodes left with neither an entry nor children, then merge a lone child into its parent.
  while (n != root_.get() && !n->snap && n->children.empty()) {
    Node* parent = n->parent;
    parent->children.erase(n->edge.front());
    n = parent;
  }
  if (n != root_.get() && !n->snap && n->children.size() == 1) {
    Node* parent = n->parent;
    auto slot = parent->children.find(n->edge.front());
    std::unique_ptr<Node> child = std::move(n->children.begin()->second);
    child->edge.insert(child->edge.begin(), n->edge.begin(), n->edge.end());
    child->parent = parent;
    slot->second = std::move(child);  // destroys n
  }
}

bool PrefixCache::EvictFor(int64_t pages) {
  KvPagePool& pool = rt_.kv_pool();
  while (pool.free_pages() < pages) {
    Node* victim = nullptr;
    for (Node* e : entries_) {
      if (!e->pinned && (victim == nullptr || e->used < victim->used)) victim = e;
    }
    if (victim == nullptr) return false;
    Evict(victim);
    ++stats_.evictions;
  }
  return true;
}

void PrefixCache::Clear() {
  // Evicting prunes and merges nodes; look the next victim up again each time.
  while (true) {
    Node* victim = nullptr;
    for (Node* e : entries_) {
      if (!e->pinned) {
        victim = e;
        break;
      }
    }
    if (victim == nullptr) break;
    Evict(victim);
    ++stats_.evictions;
  }
}

PrefixCacheStats PrefixCache::stats() const { return stats_; }

}  // namespace fak
