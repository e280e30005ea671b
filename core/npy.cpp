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

}  // namespace fak
