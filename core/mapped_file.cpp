#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

Result<int> OpenRegularFile(const std::string& path, struct stat* st) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return IoError("{}: cannot open: {}", path, std::strerror(errno));
  if (fstat(fd, st) != 0) {
    const int err = errno;
    ::close(fd);
    return IoError("{}: cannot stat: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st->st_mode)    ? "a directory"
                       : S_ISFIFO(st->st_mode) ? "a FIFO"
                       : S_ISCHR(st->st_mode)  ? "a character device"
                       : S_ISBLK(st->st_mode)  ? "a block device"
                       : S_ISSOCK(st->st_mode) ? "a socket"
                                               : "not a regular file";
    return IoError("{}: not a regular file (it is {})", path, kind);
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Result<MappedFile> MappedFile::Open(const std::string& path, MapOptions options) {
  struct stat st {};
  FAK_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, &st));
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

Result<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  struct stat st {};
  FAK_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, &st));
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return OutOfRange("{}: {} bytes is more than the {} MiB a text input may have", path,
                      static_cast<uint64_t>(st.st_size), max_bytes >> 20);
  }
  std::string out;
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return IoError("{}: read failed: {}", path, std::strerror(err));
    }
    if (n == 0) break;  // the file shrank while it was read
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

}  // namespace fak
