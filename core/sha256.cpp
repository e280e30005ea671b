#include "core/sha256.h"

#include <openssl/evp.h>

#include "core/mapped_file.h"

namespace fak {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::Update(std::span<const uint8_t> data) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size());
}

Sha256Digest Sha256::Finish() {
  Sha256Digest d{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), d.data(), &n);
  return d;
}

std::string ToHex(std::span<const uint8_t> bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

std::string Sha256Hex(std::span<const uint8_t> data) {
  Sha256 h;
  h.Update(data);
  auto d = h.Finish();
  return ToHex(d);
}

Result<std::string> Sha256File(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path, MapOptions{.will_need = true}));
  return Sha256Hex(f.bytes());
}

}  // namespace fak
