// Test-only: builds GGUF bytes field by field, so tests can write both valid files and every kind
// of malformed one (lengths, counts, types and offsets set to anything).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace fak::testing {

class GgufBytes {
 public:
  template <typename T>
  GgufBytes& Pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
    return *this;
  }
  GgufBytes& Str(const std::string& s) {
    Pod<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  GgufBytes& Header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return Pod<uint32_t>(0x46554747).Pod(version).Pod(n_tensors).Pod(n_kv);
  }
  GgufBytes& KvU32(const std::string& key, uint32_t v) { return Str(key).Pod<uint32_t>(4).Pod(v); }
  GgufBytes& KvStr(const std::string& key, const std::string& v) { return Str(key).Pod<uint32_t>(8).Str(v); }
  GgufBytes& TensorInfo(const std::string& name, std::vector<uint64_t> shape, uint32_t type,
                        uint64_t offset) {
    Str(name).Pod<uint32_t>(static_cast<uint32_t>(shape.size()));
    for (uint64_t d : shape) Pod(d);
    return Pod(type).Pod(offset);
  }
  GgufBytes& Align(size_t a = 32) {
    while (bytes.size() % a != 0) bytes.push_back(0);
    return *this;
  }
  GgufBytes& Zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }
  size_t size() const { return bytes.size(); }

  std::vector<uint8_t> bytes;
};

}  // namespace fak::testing
