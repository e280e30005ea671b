#include "engine/kv_cache.h"

#include <gtest/gtest.h>

namespace fak {
namespace {

TEST(KvCache, PagesAreAllocatedSharedAndFreed) {
  KvPagePool pool(KvGeometry{2, 2, 8, 4}, 3);
  EXPECT_EQ(pool.free_pages(), 3);
  {
    KvSequence a(&pool);
    ASSERT_TRUE(a.Reserve(9).ok());  // 3 pages of 4
    EXPECT_EQ(a.pages().size(), 3u);
    EXPECT_EQ(pool.free_pages(), 0);
    KvSequence b(&pool);
    Status full = b.Reserve(1);
    EXPECT_EQ(full.code(), StatusCode::kOutOfRange);
    EXPECT_NE(full.message().find("KV cache is full"), std::string::npos);
    // Distinct (layer, head, pos) slots do not alias.
    a.Key(5, 1, 1)[3] = 7;
    a.Value(5, 1, 1)[3] = 9;
    EXPECT_EQ(a.Key(5, 1, 1)[3], 7);
    EXPECT_EQ(a.Key(5, 1, 0)[3], 0);
    EXPECT_EQ(a.Key(5, 0, 1)[3], 0);
    EXPECT_EQ(a.Value(5, 1, 1)[3], 9);
    a.Commit(9);
    pool.Retain(a.pages()[0]);
    EXPECT_EQ(pool.refs(a.pages()[0]), 2);
    a.Truncate(4);
    EXPECT_EQ(a.pages().size(), 1u);
    EXPECT_EQ(a.size(), 4);
    EXPECT_EQ(pool.free_pages(), 2);
  }
  // The extra reference keeps page 0 alive after the sequence is gone.
  EXPECT_EQ(pool.free_pages(), 2);
  pool.Release(0);
  EXPECT_EQ(pool.free_pages(), 3);
}

}  // namespace
}  // namespace fak
