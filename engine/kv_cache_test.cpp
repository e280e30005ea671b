#include "engine/kv_cache.h"

#include <gtest/gtest.h>

namespace fak {
namespace {

std::unique_ptr<Backend> Cpu() {
  auto be = CreateBackend({.threads = 1});
  EXPECT_TRUE(be.ok());
  return std::move(be).value();
}

TEST(KvCache, PagesAreAllocatedSharedAndFreed) {
  auto be = Cpu();
  auto pool = KvPagePool::Create(*be, KvGeometry{2, 2, 8, 4}, 3);
  ASSERT_TRUE(pool.ok());
  KvPagePool& p = **pool;
  EXPECT_EQ(p.free_pages(), 3);
  {
    KvSequence a(&p);
    ASSERT_TRUE(a.Reserve(9).ok());  // 3 pages of 4
    EXPECT_EQ(a.pages().size(), 3u);
    EXPECT_EQ(p.free_pages(), 0);
    KvSequence b(&p);
    Status full = b.Reserve(1);
    EXPECT_EQ(full.code(), StatusCode::kOutOfRange);
    EXPECT_NE(full.message().find("KV cache is full"), std::string::npos);
    EXPECT_TRUE(b.pages().empty());
    a.Commit(9);
    p.Retain(a.pages()[0]);
    EXPECT_EQ(p.refs(a.pages()[0]), 2);
    a.Truncate(4);
    EXPECT_EQ(a.pages().size(), 1u);
    EXPECT_EQ(a.size(), 4);
    EXPECT_EQ(p.free_pages(), 2);
  }
  // The extra reference keeps page 0 alive after the sequence is gone.
  EXPECT_EQ(p.free_pages(), 2);
  p.Release(0);
  EXPECT_EQ(p.free_pages(), 3);
}

TEST(KvCache, AdoptSharesPagesAndWritesCopyTheSharedPartialPage) {
  auto be = Cpu();
  auto pool = KvPagePool::Create(*be, KvGeometry{1, 1, 4, 4}, 4);
  ASSERT_TRUE(pool.ok());
  KvPagePool& p = **pool;
  KvSequence a(&p), b(&p);
  ASSERT_TRUE(a.Reserve(6).ok());
  a.Commit(6);  // one full page and a partial one
  b.Adopt(a, 6);
  EXPECT_EQ(b.size(), 6);
  EXPECT_EQ(b.pages(), a.pages());
  EXPECT_EQ(p.refs(a.pages()[0]), 2);
  EXPECT_EQ(p.refs(a.pages()[1]), 2);
  // b writes position 6: the shared partial page is copied first; the full page stays shared.
  ASSERT_TRUE(b.Reserve(7).ok());
  EXPECT_EQ(b.pages()[0], a.pages()[0]);
  EXPECT_NE(b.pages()[1], a.pages()[1]);
  EXPECT_EQ(p.refs(a.pages()[1]), 1);
  EXPECT_EQ(p.refs(a.pages()[0]), 2);
  // A pool too full for the copy leaves b as it was.
  KvSequence c(&p);
  c.Adopt(a, 6);
  KvSequence hog(&p);
  ASSERT_TRUE(hog.Reserve(4).ok());  // the last free page
  EXPECT_EQ(p.free_pages(), 0);
  const std::vector<int32_t> before = c.pages();
  EXPECT_EQ(c.Reserve(7).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(c.pages(), before);
  // Adopting a shorter prefix shares only the pages it covers.
  KvSequence d(&p);
  d.Adopt(a, 3);
  EXPECT_EQ(d.size(), 3);
  EXPECT_EQ(d.pages().size(), 1u);
}

}  // namespace
}  // namespace fak
