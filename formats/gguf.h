// GGUF reader (versions 2 and 3). The file is memory-mapped; metadata is parsed into values,
// tensor data is used in place from the mapping and never copied.
//
// Layout (little-endian): magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
// kv_count × (string key, u32 value_type, value), tensor_count × (string name, u32 n_dims,
// n_dims × u64 dim, u32 ggml_type, u64 offset), padding to `general.alignment` (default 32),
// then the tensor data section; each tensor's offset is relative to the data section.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"
#include "quant/ggml_type.h"

namespace fak {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view GgufValueTypeName(GgufValueType t);

struct GgufValue;
// An array holds elements of one type; arrays may nest (an array of arrays).
struct GgufArray {
  GgufValueType element_type = GgufValueType::kUint8;
  std::vector<GgufValue> values;
};

struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> v;

  // Typed accessors: nullopt/nullptr when the value has another type. Integer accessors accept any
  // integer type whose value fits.
  std::optional<uint64_t> AsUint() const;
  std::optional<int64_t> AsInt() const;
  std::optional<double> AsFloat() const;  // float32/float64, or an integer
  std::optional<bool> AsBool() const;
  const std::string* AsString() const;
  const GgufArray* AsArray() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> shape;  // ggml order: shape[0] is the contiguous (row) dimension
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // relative to the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
};

struct GgufParseOptions {
  MapOptions map;
};

class GgufFile {
 public:
  GgufFile() = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  GgufFile(GgufFile&&) = default;
  GgufFile& operator=(GgufFile&&) = default;

  static Result<GgufFile> Open(const std::string& path, GgufParseOptions options = {});
  // Parses bytes that the caller keeps alive (fuzzing, in-memory files). `source` names them in errors.
  static Result<GgufFile> Parse(std::span<const uint8_t> bytes, std::string source);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
  uint64_t file_size() const { return size_; }
  const std::string& path() const { return source_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* Find(std::string_view key) const;
  // Typed lookups that name the key in their error ("missing key llama.block_count", "key X is a string, want
  // uint").
  Result<uint64_t> GetUint(std::string_view key) const;
  Result<double> GetFloat(std::string_view key) const;
  Result<std::string> GetString(std::string_view key) const;
  Result<const GgufArray*> GetArray(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;

 private:
  static Result<GgufFile> ParseImpl(GgufFile file, std::span<const uint8_t> bytes);

  MappedFile map_;
  std::string source_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  uint64_t size_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace fak
