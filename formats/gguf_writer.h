// GGUF writer (version 3). Metadata and tensor infos are declared first; tensor bytes are then
// streamed in declaration order, so a quantizer never holds the whole output in memory. The file is
// written to "<path>.tmp" and renamed on success, so a failed write leaves no partial file.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/gguf.h"

namespace fak {

class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32) : alignment_(alignment) {}

  void SetUint32(std::string key, uint32_t v);
  void SetUint64(std::string key, uint64_t v);
  void SetInt32(std::string key, int32_t v);
  void SetFloat32(std::string key, float v);
  void SetBool(std::string key, bool v);
  void SetString(std::string key, std::string v);
  void SetStringArray(std::string key, std::vector<std::string> v);
  void SetFloat32Array(std::string key, std::vector<float> v);
  void SetInt32Array(std::string key, std::vector<int32_t> v);
  // Any value, including nested arrays (as read from another GGUF file).
  void SetValue(std::string key, GgufValue v);

  // Produces a tensor's bytes into `out` (exactly its size). Called once, in declaration order.
  using Producer = std::function<Status(std::span<uint8_t> out)>;
  // shape in ggml order (shape[0] contiguous). Fails on an unknown type or a bad row length.
  Status AddTensor(std::string name, std::vector<uint64_t> shape, GgmlType type, Producer produce);
  // Convenience: bytes the caller keeps alive until Write returns.
  Status AddTensor(std::string name, std::vector<uint64_t> shape, GgmlType type,
                   std::span<const uint8_t> bytes);

  Status Write(const std::string& path);

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> shape;
    GgmlType type;
    uint64_t n_bytes;
    Producer produce;
  };
  uint64_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace fak
