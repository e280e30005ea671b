// A read-only memory-mapped file. Tensor data is used in place from the mapping, never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace fak {

struct MapOptions {
  bool huge_pages = false;  // madvise(MADV_HUGEPAGE): this CPU streams ~60% faster from huge pages
  bool will_need = false;   // madvise(MADV_WILLNEED): start reading ahead now
  bool populate = false;    // MAP_POPULATE: fault every page in at open (for benchmarks)
};

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  static Result<MappedFile> Open(const std::string& path, MapOptions options = {});

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void Reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string: config.json, tokenizer.json, templates.
Result<std::string> ReadFileToString(const std::string& path);

}  // namespace fak
