// SHA-256 through OpenSSL's EVP interface.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace fak {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::span<const uint8_t> data);
  Sha256Digest Finish();

 private:
  void* ctx_;  // EVP_MD_CTX*
};

std::string ToHex(std::span<const uint8_t> bytes);
std::string Sha256Hex(std::span<const uint8_t> data);
// Hashes a file by mapping it: no copy, streams at memory speed.
Result<std::string> Sha256File(const std::string& path);

}  // namespace fak
