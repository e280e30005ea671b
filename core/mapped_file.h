// A read-only memory-mapped file. Tensor data is used in place from the mapping, never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <sys/stat.h>

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

// The most ReadFileToString reads: text inputs (prompts, configs, tokenizers, templates) past it are
// refused rather than read until memory runs out.
inline constexpr size_t kMaxTextFileBytes = size_t{256} << 20;

// Reads a whole (small) regular file into a string: config.json, tokenizer.json, templates, prompts.
// A FIFO, device or directory is an error at once (never a blocking open or an endless read), and so is
// a file over max_bytes.
Result<std::string> ReadFileToString(const std::string& path, size_t max_bytes = kMaxTextFileBytes);

// Opens a regular file for reading without ever blocking (a FIFO is refused, not waited on); the
// caller closes the descriptor. `st` receives its fstat.
Result<int> OpenRegularFile(const std::string& path, struct stat* st);

}  // namespace fak
