// The radix prefix cache: computed contexts kept by token prefix so that a request whose prompt
// begins like an earlier one computes only the rest.
//
// A radix tree over token ids; an entry is a SequenceSnapshot (tokens, KV pages by reference, the
// recurrent-state copy) hung on the node where its tokens end. Matching is token-granular: a
// prompt that shares k tokens with any entry reuses those k positions, because a position's keys
// and values depend only on the tokens before it, so every entry below a node holds the same cache
// for the node's prefix. The sequence restored from an entry is truncated to k; its partial last
// page stays shared until the first write copies it (KvSequence::Reserve).
//
// For architectures with recurrent state a snapshot cannot be cut short (the state after k tokens is
// not part of the state after more), so there a match ends only where an entry ends.
//
// Memory: entries share pages with each other and with running sequences by reference count.
// Evicting an entry frees what nobody else holds; EvictFor drops least-recently-used unpinned entries
// until the pool has the pages asked for.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "engine/runtime.h"

namespace fak {

struct PrefixCacheStats {
  int64_t entries = 0;
  int64_t pinned_entries = 0;
  int64_t pinned_tokens = 0;
  int64_t evictions = 0;
  int64_t lookups = 0;
  int64_t hit_tokens = 0;     // tokens served from the cache, over all lookups
  int64_t lookup_tokens = 0;  // tokens asked for, over all lookups
};

class PrefixCache {
 public:
  explicit PrefixCache(Runtime& runtime);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Gives `seq` the longest cached prefix of `tokens`, at most max_tokens long, and returns its
  // length (0: nothing matched, seq is left empty). Marks the entry used.
  int64_t Restore(std::span<const int32_t> tokens, int64_t max_tokens, Sequence& seq);
  // Counts a lookup in the statistics: `asked` prompt tokens, `hit` of them restored.
  void RecordLookup(int64_t asked, int64_t hit);
  // The length Restore would give, without restoring or counting a lookup.
  int64_t MatchLength(std::span<const int32_t> tokens, int64_t max_tokens) const;
  // How many leading tokens (at most max_tokens) lie on a path of the tree, whether or not an entry
  // ends there (equal to MatchLength without recurrent state).
  int64_t SharedLength(std::span<const int32_t> tokens, int64_t max_tokens) const;

  // Keeps seq's context (its tokens()) as an entry; pinned entries are never evicted. An entry for
  // the same tokens is kept as it is (pinning it if asked). When the runtime's recurrent-state slots
  // are used up, least-recently-used unpinned entries make room; fails when none is left to evict.
  Status Insert(const Sequence& seq, bool pinned = false);

  // Evicts least-recently-used unpinned entries until the pool has `pages` free pages or nothing is
  // left to evict; returns whether the pool has them.
  bool EvictFor(int64_t pages);
  // Drops every unpinned entry.
  void Clear();

  PrefixCacheStats stats() const;

 private:
  struct Node;
  Node* Walk(std::span<const int32_t> tokens, int64_t max_tokens, int64_t* matched) const;
  Node* AnyEntryBelow(Node* n) const;
  void Evict(Node* n);

  Runtime& rt_;
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;
  PrefixCacheStats stats_;
  std::vector<Node*> entries_;  // nodes holding a snapshot
};

}  // namespace fak
