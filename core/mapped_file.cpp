#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace fak {

MappedFile::~MappedFile() { Reset(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_), path_(std::move(other.path_)) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = other.data_;
    size_ = other.size_;
    path_ = std::move(other.path_);
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void MappedFile::Reset() {
  if (data_ != nullptr && size_ > 0) munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

Result<MappedFile> MappedFile::Open(const std::string& path, MapOptions options) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return IoError("{}: cannot stat: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError("{}: not a regular file", path);
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ == 0) {  // mmap of length 0 fails; an empty file is a valid (empty) mapping
    ::close(fd);
    return file;
  }
  int flags = MAP_PRIVATE;
  if (options.populate) flags |= MAP_POPULATE;
  void* p = mmap(nullptr, file.size_, PROT_READ, flags, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    file.size_ = 0;
    return IoError("{}: mmap failed: {}", path, std::strerror(err));
  }
  file.data_ = static_cast<const uint8_t*>(p);
  if (options.huge_pages) madvise(p, file.size_, MADV_HUGEPAGE);  // advisory: ignore failure
  if (options.will_need) madvise(p, file.size_, MADV_WILLNEED);
  return file;
}

Result<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError("{}: read failed", path);
  return ss.str();
}

}  // namespace fak
