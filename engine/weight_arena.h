// One allocation that holds every weight fak converts or copies at load, backed by transparent huge
// pages where the kernel allows (this CPU streams ~60% faster from huge pages), bump-allocated.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"

namespace fak {

class WeightArena {
 public:
  WeightArena() = default;
  ~WeightArena();
  WeightArena(const WeightArena&) = delete;
  WeightArena& operator=(const WeightArena&) = delete;
  WeightArena(WeightArena&& o) noexcept;
  WeightArena& operator=(WeightArena&& o) noexcept;

  // Reserves `bytes` (rounded up to 2 MiB). Pages are touched only when written.
  static Result<WeightArena> Create(size_t bytes, bool huge_pages);

  // 64-byte aligned; nullptr when the arena is full (a loader sizing bug, reported by the caller).
  uint8_t* Allocate(size_t bytes);
  size_t used() const { return used_; }
  size_t capacity() const { return size_; }

  static size_t Aligned(size_t bytes) { return (bytes + 63) & ~size_t{63}; }

 private:
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  size_t used_ = 0;
};

}  // namespace fak
