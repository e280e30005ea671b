#include "engine/kv_cache.h"

namespace fak {

KvPagePool::KvPagePool(KvGeometry geometry, int64_t max_pages)
    : g_(geometry),
      max_pages_(max_pages),
      page_elems_(static_cast<size_t>(2 * g_.n_layer * g_.n_kv_head * g_.page_tokens * g_.head_dim * g_.units())) {}

Result<int32_t> KvPagePool::Allocate() {
  int32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (allocated_ < max_pages_) {
    id = static_cast<int32_t>(allocated_++);
    pages_.emplace_back(page_elems_);
    refs_.push_back(0);
  } else {
    return OutOfRange("KV cache is full ({} pages of {} tokens)", max_pages_, g_.page_tokens);
  }
  refs_[static_cast<size_t>(id)] = 1;
  return id;
}

void KvPagePool::Retain(int32_t page) { ++refs_[static_cast<size_t>(page)]; }

void KvPagePool::Release(int32_t page) {
  if (--refs_[static_cast<size_t>(page)] == 0) free_.push_back(page);
}

uint16_t* KvPagePool::Block(int32_t page, int64_t layer, int64_t kv_head, int kv) {
  const size_t block = static_cast<size_t>(g_.page_tokens * g_.head_dim * g_.units());
  const size_t index = static_cast<size_t>((layer * g_.n_kv_head + kv_head) * 2 + kv);
  return pages_[static_cast<size_t>(page)].data() + index * block;
}

uint16_t* KvPagePool::Keys(int32_t page, int64_t layer, int64_t kv_head) { return Block(page, layer, kv_head, 0); }
uint16_t* KvPagePool::Values(int32_t page, int64_t layer, int64_t kv_head) { return Block(page, layer, kv_head, 1); }

KvSequence::~KvSequence() { Truncate(0); }

Status KvSequence::Reserve(int64_t n) {
  const int64_t pt = pool_->geometry().page_tokens;
  while (static_cast<int64_t>(pages_.size()) * pt < n) {
    FAK_ASSIGN_OR_RETURN(int32_t id, pool_->Allocate());
    pages_.push_back(id);
  }
  return Status::Ok();
}

void KvSequence::Truncate(int64_t n) {
  const int64_t pt = pool_->geometry().page_tokens;
  const size_t keep = static_cast<size_t>((n + pt - 1) / pt);
  while (pages_.size() > keep) {
    pool_->Release(pages_.back());
    pages_.pop_back();
  }
  if (n < n_tokens_) n_tokens_ = n;
}

uint16_t* KvSequence::Key(int64_t pos, int64_t layer, int64_t kv_head) {
  const int64_t pt = pool_->geometry().page_tokens;
  return pool_->Keys(pages_[static_cast<size_t>(pos / pt)], layer, kv_head) +
         (pos % pt) * pool_->geometry().head_dim * pool_->geometry().units();
}

uint16_t* KvSequence::Value(int64_t pos, int64_t layer, int64_t kv_head) {
  const int64_t pt = pool_->geometry().page_tokens;
  return pool_->Values(pages_[static_cast<size_t>(pos / pt)], layer, kv_head) +
         (pos % pt) * pool_->geometry().head_dim * pool_->geometry().units();
}

}  // namespace fak
