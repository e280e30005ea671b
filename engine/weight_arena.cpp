#include "engine/weight_arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

namespace fak {

WeightArena::~WeightArena() {
  if (base_ != nullptr) munmap(base_, size_);
}

WeightArena::WeightArena(WeightArena&& o) noexcept : base_(o.base_), size_(o.size_), used_(o.used_) {
  o.base_ = nullptr;
  o.size_ = o.used_ = 0;
}

WeightArena& WeightArena::operator=(WeightArena&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) munmap(base_, size_);
    base_ = o.base_;
    size_ = o.size_;
    used_ = o.used_;
    o.base_ = nullptr;
    o.size_ = o.used_ = 0;
  }
  return *this;
}

Result<WeightArena> WeightArena::Create(size_t bytes, bool huge_pages) {
  constexpr size_t kHuge = size_t{2} << 20;
  WeightArena a;
  a.size_ = (bytes + kHuge - 1) / kHuge * kHuge;
  if (a.size_ == 0) a.size_ = kHuge;
  // Over-map by one huge page so the base can be aligned to 2 MiB, then trim.
  const size_t span = a.size_ + kHuge;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return IoError("cannot reserve {} bytes for weights: {}", a.size_, std::strerror(errno));
  }
  // Offsets from the mapping, so the pointers keep their provenance.
  auto* raw = static_cast<uint8_t*>(p);
  const auto addr = reinterpret_cast<uintptr_t>(p);
  const size_t head = ((addr + kHuge - 1) & ~(kHuge - 1)) - addr;
  if (head > 0) munmap(raw, head);
  const size_t tail = span - head - a.size_;
  if (tail > 0) munmap(raw + head + a.size_, tail);
  a.base_ = raw + head;
  if (huge_pages) madvise(a.base_, a.size_, MADV_HUGEPAGE);
  return a;
}

uint8_t* WeightArena::Allocate(size_t bytes) {
  const size_t n = Aligned(bytes);
  if (n > size_ - used_) return nullptr;
  uint8_t* p = base_ + used_;
  used_ += n;
  return p;
}

}  // namespace fak
