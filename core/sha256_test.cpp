#include "core/sha256.h"

#include <gtest/gtest.h>

#include <string_view>

namespace fak {
namespace {

std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(Sha256, KnownVectors) {  // FIPS 180-2 examples
  EXPECT_EQ(Sha256Hex(Bytes("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex(Bytes("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  Sha256 h;
  h.Update(Bytes("ab"));
  h.Update(Bytes("c"));
  auto d = h.Finish();
  EXPECT_EQ(ToHex(d), Sha256Hex(Bytes("abc")));
}

}  // namespace
}  // namespace fak
