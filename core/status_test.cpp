#include "core/status.h"

#include <gtest/gtest.h>

namespace fak {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("{} is odd", x);
  return x / 2;
}

Result<int> Quarter(int x) {
  FAK_ASSIGN_OR_RETURN(int h, Half(x));
  FAK_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(Status, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = Corrupt("f.gguf: offset {}: bad magic", 0);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.ToString(), "corrupt: f.gguf: offset 0: bad magic");
  EXPECT_EQ(s.WithContext("loading").message(), "loading: f.gguf: offset 0: bad magic");
}

TEST(Result, PropagatesThroughMacros) {
  auto r = Quarter(8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2);
  auto e = Quarter(6);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "3 is odd");
  EXPECT_TRUE(r.status().ok());
}

}  // namespace
}  // namespace fak
