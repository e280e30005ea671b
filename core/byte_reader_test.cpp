#include "core/byte_reader.h"

#include <gtest/gtest.h>

#include <vector>

namespace fak {
namespace {

TEST(ByteReader, ReadsAndStopsAtEnd) {
  std::vector<uint8_t> buf = {1, 0, 0, 0, 2, 0};
  ByteReader r(buf, "buf");
  auto a = r.Read<uint32_t>("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 1u);
  auto b = r.Read<uint32_t>("field b");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "buf: offset 4: truncated while reading field b (need 4 bytes, 2 left)");
  EXPECT_EQ(r.offset(), 4u);  // a failed read does not move
  EXPECT_FALSE(r.ReadBytes(~0ull, "huge").ok());
  EXPECT_TRUE(r.Skip(2, "tail").ok());
  EXPECT_EQ(r.remaining(), 0u);
}

}  // namespace
}  // namespace fak
