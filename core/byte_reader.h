// Bounds-checked little-endian reads from a byte span. Every read either succeeds or returns a
// Status that names the source, the offset and what was being read; nothing reads past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace fak {

class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> data, std::string source) : data_(data), source_(std::move(source)) {}

  size_t offset() const { return pos_; }
  size_t size() const { return data_.size(); }
  size_t remaining() const { return data_.size() - pos_; }
  const std::string& source() const { return source_; }

  template <typename T>
  Result<T> Read(std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return Truncated(what, sizeof(T));
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A view of the next n bytes, without copying.
  Result<std::span<const uint8_t>> ReadBytes(uint64_t n, std::string_view what) {
    if (n > remaining()) return Truncated(what, n);
    auto s = data_.subspan(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

  Status Skip(uint64_t n, std::string_view what) {
    if (n > remaining()) return Truncated(what, n);
    pos_ += static_cast<size_t>(n);
    return Status::Ok();
  }

  // Error helper: "FILE: offset N: MESSAGE".
  template <typename... Args>
  Status Error(fmt::format_string<Args...> f, Args&&... args) const {
    return Corrupt("{}: offset {}: {}", source_, pos_, fmt::format(f, std::forward<Args>(args)...));
  }

 private:
  Status Truncated(std::string_view what, uint64_t need) const {
    return Corrupt("{}: offset {}: truncated while reading {} (need {} bytes, {} left)", source_, pos_, what,
                   need, remaining());
  }

  std::span<const uint8_t> data_;
  std::string source_;
  size_t pos_ = 0;
};

}  // namespace fak
