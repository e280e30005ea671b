// The KV cache's bookkeeping: fixed-size pages held by a backend (ops/backend.h KvGeometry), one pool
// per loaded model shared by every sequence. Pages are reference-counted, so sequences that share a
// prefix share its full pages; a shared page that must be written is copied first (copy-on-write).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "ops/backend.h"

namespace fak {

class KvPagePool {
 public:
  // Creates the backend's store of up to max_pages pages; storage grows as pages are first used.
  static Result<std::unique_ptr<KvPagePool>> Create(Backend& backend, const KvGeometry& geometry,
                                                    int64_t max_pages);
  KvPagePool(const KvPagePool&) = delete;
  KvPagePool& operator=(const KvPagePool&) = delete;

  const KvGeometry& geometry() const { return g_; }
  int32_t store() const { return store_; }
  Backend& backend() const { return backend_; }
  int64_t max_pages() const { return max_pages_; }
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()) + (max_pages_ - allocated_); }
  int64_t used_pages() const { return max_pages_ - free_pages(); }

  // A fresh page with one reference; an error when the budget is used up.
  Result<int32_t> Allocate();
  void Retain(int32_t page);
  void Release(int32_t page);
  int32_t refs(int32_t page) const { return refs_[static_cast<size_t>(page)]; }

 private:
  KvPagePool(Backend& backend, const KvGeometry& g, int64_t max_pages, int32_t store)
      : backend_(backend), g_(g), max_pages_(max_pages), store_(store) {}

  Backend& backend_;
  KvGeometry g_;
  int64_t max_pages_;
  int32_t store_;
  int64_t allocated_ = 0;  // pages handed out at least once
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

  // Makes positions [size(), n) writable: allocates pages, and copies a shared page that holds
  // position size() so writing it cannot change another sequence. Fails cleanly when the pool is full.
  Status Reserve(int64_t n);
  // Marks positions [size(), n) as written.
  void Commit(int64_t n) { n_tokens_ = n; }
  // Forgets positions >= n (pages past it are released).
  void Truncate(int64_t n);
  void Clear() { Truncate(0); }
  // Drops this sequence's positions and shares the first n positions of `other` instead (full pages
  // and a partial last page alike, by reference: a later write copies the shared page first).
  void Adopt(const KvSequence& other, int64_t n);

 private:
  KvPagePool* pool_;
  std::vector<int32_t> pages_;
  int64_t n_tokens_ = 0;
};

}  // namespace fak
