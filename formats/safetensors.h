// safetensors reader: an 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and [begin, end) byte range in the data section, then the data. Files are mapped;
// tensor data is used in place. A checkpoint directory may be sharded through
// model.safetensors.index.json ("weight_map": tensor name -> shard file).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"

namespace fak {

enum class SafetensorsDtype {
  kBool,
  kU8,
  kI8,
  kU16,
  kI16,
  kF16,
  kBF16,
  kU32,
  kI32,
  kF32,
  kU64,
  kI64,
  kF64,
  kF8_E4M3,
  kF8_E5M2,
};
std::optional<SafetensorsDtype> SafetensorsDtypeFromName(std::string_view name);
std::string_view SafetensorsDtypeName(SafetensorsDtype d);
size_t SafetensorsDtypeSize(SafetensorsDtype d);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<uint64_t> shape;  // row-major, as written by torch: shape.back() is contiguous
  uint64_t n_elements = 0;
  uint64_t begin = 0;  // relative to the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;
};

class SafetensorsFile {
 public:
  SafetensorsFile() = default;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  SafetensorsFile(SafetensorsFile&&) = default;
  SafetensorsFile& operator=(SafetensorsFile&&) = default;

  static Result<SafetensorsFile> Open(const std::string& path, MapOptions options = {});
  static Result<SafetensorsFile> Parse(std::span<const uint8_t> bytes, std::string source);

  const std::string& path() const { return source_; }
  uint64_t file_size() const { return size_; }
  uint64_t header_size() const { return header_size_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }  // "__metadata__"
  const SafetensorsTensor* Find(std::string_view name) const;

 private:
  static Result<SafetensorsFile> ParseImpl(SafetensorsFile f, std::span<const uint8_t> bytes);

  MappedFile map_;
  std::string source_;
  uint64_t size_ = 0;
  uint64_t header_size_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// A whole checkpoint: one model.safetensors, a sharded set through model.safetensors.index.json, or a
// single .safetensors file given directly.
class SafetensorsCheckpoint {
 public:
  static Result<SafetensorsCheckpoint> Open(const std::string& path, MapOptions options = {});

  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  // Every tensor of every shard, in shard order.
  std::vector<const SafetensorsTensor*> tensors() const;
  const SafetensorsTensor* Find(std::string_view name) const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const SafetensorsTensor*, std::less<>> index_;
};

}  // namespace fak
