// An anonymous mapping aligned to 2 MiB with MADV_HUGEPAGE (benchmarks measure DRAM, not TLB misses;
// the engine's weight arena does the same). Unmapped on destruction; data() is null if mmap failed.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace fak::bench {

class HugeBuffer {
 public:
  explicit HugeBuffer(size_t bytes) : size_(bytes) {
    constexpr size_t kHuge = size_t{2} << 20;
    raw_size_ = bytes + kHuge;
    void* p = mmap(nullptr, raw_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    raw_ = static_cast<uint8_t*>(p);
    data_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw_) + kHuge - 1) & ~(kHuge - 1));
    madvise(data_, bytes, MADV_HUGEPAGE);
  }
  ~HugeBuffer() {
    if (raw_ != nullptr) munmap(raw_, raw_size_);
  }
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* raw_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0, raw_size_ = 0;
};

}  // namespace fak::bench
