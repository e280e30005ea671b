#include "engine/kv_cache.h"

#include <algorithm>

namespace fak {

Result<std::unique_ptr<KvPagePool>> KvPagePool::Create(Backend& backend, const KvGeometry& geometry,
                                                       int64_t max_pages) {
  FAK_ASSIGN_OR_RETURN(int32_t store, backend.CreateKv(geometry, max_pages));
  return std::unique_ptr<KvPagePool>(new KvPagePool(backend, geometry, max_pages, store));
}

Result<int32_t> KvPagePool::Allocate() {
  int32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (allocated_ < max_pages_) {
    FAK_RETURN_IF_ERROR(backend_.GrowKv(store_, allocated_ + 1));
    id = static_cast<int32_t>(allocated_++);
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

KvSequence::~KvSequence() { Truncate(0); }

Status KvSequence::Reserve(int64_t n) {
  const int64_t pt = pool_->geometry().page_tokens;
  const size_t need = static_cast<size_t>((n + pt - 1) / pt);
  const size_t have = pages_.size();
  // Every allocation first, so a full pool leaves the sequence as it was.
  const size_t write_page = static_cast<size_t>(n_tokens_ / pt);
  const bool copy = n > n_tokens_ && write_page < have && pool_->refs(pages_[write_page]) > 1;
  std::vector<int32_t> fresh;
  for (size_t i = 0; i < (need > have ? need - have : 0) + (copy ? 1 : 0); ++i) {
    auto id = pool_->Allocate();
    if (!id.ok()) {
      for (int32_t p : fresh) pool_->Release(p);
      return id.status();
    }
    fresh.push_back(*id);
  }
  if (copy) {
    const int32_t dst = fresh.back();
    fresh.pop_back();
    pool_->backend().CopyKvPage(pool_->store(), pages_[write_page], dst);
    pool_->Release(pages_[write_page]);
    pages_[write_page] = dst;
  }
  pages_.insert(pages_.end(), fresh.begin(), fresh.end());
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

void KvSequence::Adopt(const KvSequence& other, int64_t n) {
  n = std::min(n, other.size());
  const int64_t pt = pool_->geometry().page_tokens;
  const size_t share = static_cast<size_t>((n + pt - 1) / pt);
  // Retained before ours are released: the two lists may share pages.
  for (size_t i = 0; i < share; ++i) pool_->Retain(other.pages_[i]);
  Truncate(0);
  pages_.assign(other.pages_.begin(), other.pages_.begin() + static_cast<std::ptrdiff_t>(share));
  n_tokens_ = n;
}

}  // namespace fak
