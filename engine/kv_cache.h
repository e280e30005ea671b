// KV cache in fixed-size pages of f16 (default) or f32 (for exact comparisons with f32 references). A page holds `page_tokens` positions of every layer's keys and
// values; a sequence is a list of page ids. Pages are reference-counted so sequences that share a
// prefix can share its full pages (the radix prefix cache builds on this).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace fak {

struct KvGeometry {
  int64_t n_layer = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
  int64_t page_tokens = 16;
  bool f32 = false;  // keys and values in f32 instead of f16
  // uint16_t units per stored value.
  int64_t units() const { return f32 ? 2 : 1; }
};

class KvPagePool {
 public:
  KvPagePool(KvGeometry geometry, int64_t max_pages);
  KvPagePool(const KvPagePool&) = delete;
  KvPagePool& operator=(const KvPagePool&) = delete;

  const KvGeometry& geometry() const { return g_; }
  int64_t max_pages() const { return max_pages_; }
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()) + (max_pages_ - allocated_); }

  // A fresh page with one reference; an error when the budget is used up.
  Result<int32_t> Allocate();
  void Retain(int32_t page);
  void Release(int32_t page);
  int32_t refs(int32_t page) const { return refs_[static_cast<size_t>(page)]; }

  // (page_tokens, head_dim) keys / values of one layer and kv head within a page: f16, or f32 stored
  // in pairs of uint16_t when geometry().f32.
  uint16_t* Keys(int32_t page, int64_t layer, int64_t kv_head);
  uint16_t* Values(int32_t page, int64_t layer, int64_t kv_head);

 private:
  uint16_t* Block(int32_t page, int64_t layer, int64_t kv_head, int kv);

  KvGeometry g_;
  int64_t max_pages_;
  int64_t allocated_ = 0;  // pages handed out at least once (storage grows on demand)
  size_t page_elems_;      // uint16_t units per page: 2 * n_layer * n_kv_head * page_tokens * head_dim * units
  std::vector<std::vector<uint16_t>> pages_;
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;
};

// One sequence's view of the cache: positions [0, size()) live in pages()[pos / page_tokens].
class KvSequence {
 public:
  explicit KvSequence(KvPagePool* pool) : pool_(pool) {}
  ~KvSequence();
  KvSequence(const KvSequence&) = delete;
  KvSequence& operator=(const KvSequence&) = delete;

  int64_t size() const { return n_tokens_; }
  const std::vector<int32_t>& pages() const { return pages_; }
  KvPagePool& pool() { return *pool_; }

  // Makes room for positions up to n (allocating pages); fails cleanly when the pool is full.
  Status Reserve(int64_t n);
  // Marks positions [size(), n) as written.
  void Commit(int64_t n) { n_tokens_ = n; }
  // Forgets positions >= n (pages past it are released).
  void Truncate(int64_t n);
  void Clear() { Truncate(0); }

  uint16_t* Key(int64_t pos, int64_t layer, int64_t kv_head);
  uint16_t* Value(int64_t pos, int64_t layer, int64_t kv_head);

 private:
  KvPagePool* pool_;
  std::vector<int32_t> pages_;
  int64_t n_tokens_ = 0;
};

}  // namespace fak
