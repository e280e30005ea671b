#include "core/npy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/mapped_file.h"

namespace fak {

Result<NpyArray> ReadNpyF32(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  const uint8_t* p = f.data();
  if (f.size() < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0) return Corrupt("{}: not a .npy file", path);
  const uint8_t major = p[6];
  size_t header_len, start;
  if (major == 1) {
    header_len = p[8] | (static_cast<size_t>(p[9]) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (f.size() < 12) return Corrupt("{}: truncated .npy header", path);
    header_len = p[8] | (size_t{p[9]} << 8) | (size_t{p[10]} << 16) | (size_t{p[11]} << 24);
    start = 12;
  } else {
    return Unsupported("{}: .npy version {}", path, major);
  }
  if (start + header_len > f.size()) return Corrupt("{}: truncated .npy header", path);
  std::string h(reinterpret_cast<const char*>(p + start), header_len);
  if (h.find("'descr': '<f4'") == std::string::npos)
    return Unsupported("{}: only little-endian float32 .npy", path);
  if (h.find("'fortran_order': True") != std::string::npos)
    return Unsupported("{}: Fortran-order .npy", path);
  const size_t a = h.find("'shape': (");
  if (a == std::string::npos) return Corrupt("{}: .npy header has no shape", path);
  NpyArray out;
  int64_t n = 1;
  const char* s = h.c_str() + a + 10;
  while (*s != ')' && *s != '\0') {
    while (*s == ' ' || *s == ',') ++s;
    if (*s == ')') break;
    char* end = nullptr;
    const long long d = std::strtoll(s, &end, 10);
    if (end == s || d < 0) return Corrupt("{}: bad .npy shape", path);
    out.shape.push_back(d);
    n *= d;
    s = end;
  }
  const size_t data_at = start + header_len;
  if (f.size() - data_at != static_cast<size_t>(n) * 4) {
    return Corrupt("{}: {} bytes of data for {} float32 values", path, f.size() - data_at, n);
  }
  out.data.resize(static_cast<size_t>(n));
  std::memcpy(out.data.data(), p + data_at, out.data.size() * 4);
  return out;
}

Status WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::string dims;
  int64_t n = 1;
  for (int64_t d : shape) {
    dims += std::to_string(d) + ",";
    n *= d;
  }
  if (shape.size() > 1) dims.pop_back();
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return IoError("{}: cannot create: {}", path, std::strerror(errno));
  const uint8_t pre[10] = {0x93,
                           'N',
                           'U',
                           'M',
                           'P',
                           'Y',
                           1,
                           0,
                           static_cast<uint8_t>(h.size() & 0xFF),
                           static_cast<uint8_t>(h.size() >> 8)};
  bool ok = std::fwrite(pre, 1, 10, f) == 10 && std::fwrite(h.data(), 1, h.size(), f) == h.size() &&
            std::fwrite(data, 4, static_cast<size_t>(n), f) == static_cast<size_t>(n);
  ok = std::fclose(f) == 0 && ok;
  if (!ok) return IoError("{}: write failed", path);
  return Status::Ok();
}

namespace {

// The version 1.0 preamble and header of a (rows, cols) f32 array, rows right-aligned in a fixed
// width so the header can be rewritten in place once the count is known.
std::string NpyHeader(int64_t rows, int64_t cols) {
  std::string h =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({:>20}, {}), }}", rows, cols);
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = {'\x93',
                     'N',
                     'U',
                     'M',
                     'P',
                     'Y',
                     1,
                     0,
                     static_cast<char>(h.size() & 0xFF),
                     static_cast<char>(h.size() >> 8)};
  return out + h;
}

}  // namespace

Result<std::unique_ptr<NpyRowWriter>> NpyRowWriter::Create(const std::string& path, int64_t cols) {
  if (cols <= 0) return InvalidArgument("{}: rows of {} values", path, cols);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return IoError("{}: cannot create: {}", path, std::strerror(errno));
  std::unique_ptr<NpyRowWriter> w(new NpyRowWriter(path, f, cols));
  const std::string h = NpyHeader(0, cols);
  if (std::fwrite(h.data(), 1, h.size(), f) != h.size())
    return IoError("{}: write failed: {}", path, std::strerror(errno));
  return w;
}

NpyRowWriter::~NpyRowWriter() {
  if (f_ == nullptr) return;
  std::fclose(f_);
  std::remove(path_.c_str());
}

Status NpyRowWriter::Append(std::span<const float> row) {
  if (f_ == nullptr) return Internal("{}: written after Finish", path_);
  if (static_cast<int64_t>(row.size()) != cols_) {
    return Internal("{}: a row of {} values, the file's rows have {}", path_, row.size(), cols_);
  }
  if (std::fwrite(row.data(), 4, row.size(), f_) != row.size()) {
    return IoError("{}: write failed: {}", path_, std::strerror(errno));
  }
  ++rows_;
  return Status::Ok();
}

Status NpyRowWriter::Finish() {
  if (f_ == nullptr) return Internal("{}: finished twice", path_);
  const std::string h = NpyHeader(rows_, cols_);
  const bool ok = std::fseek(f_, 0, SEEK_SET) == 0 && std::fwrite(h.data(), 1, h.size(), f_) == h.size();
  const int err = errno;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok || !closed) {
    std::remove(path_.c_str());
    return IoError("{}: write failed: {}", path_, std::strerror(ok ? errno : err));
  }
  return Status::Ok();
}

}  // namespace fak
