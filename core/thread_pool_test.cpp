#include "core/thread_pool.h"

#include <atomic>
#include <vector>

#include <gtest/gtest.h>

namespace fak {
namespace {

TEST(ThreadPool, RunsEveryIndexOnce) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<std::atomic<int>> hits(3);
    pool.Run([&](int i, int n) {
      EXPECT_EQ(n, 3);
      hits[i].fetch_add(1);
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, ParallelForCoversTheRangeInGrains) {
  ThreadPool pool(2);
  for (int64_t n : {0, 1, 15, 16, 17, 100, 1000}) {
    std::vector<std::atomic<int>> seen(n);
    pool.ParallelFor(n, 16, [&](int64_t b, int64_t e) {
      EXPECT_EQ(b % 16, 0);
      EXPECT_TRUE(e % 16 == 0 || e == n);
      for (int64_t i = b; i < e; ++i) seen[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << n << " " << i;
  }
}

TEST(ThreadPool, ParallelForDynamicCoversTheRangeOnceInGrains) {
  ThreadPool pool(2);
  for (int64_t n : {0, 1, 15, 16, 17, 100, 1000, 151936}) {
    std::vector<std::atomic<int>> seen(n);
    std::atomic<int> chunks{0};
    pool.ParallelForDynamic(n, 16, [&](int64_t b, int64_t e) {
      EXPECT_EQ(b % 16, 0);
      EXPECT_TRUE(e % 16 == 0 || e == n);
      chunks.fetch_add(1);
      for (int64_t i = b; i < e; ++i) seen[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << n << " " << i;
    if (n >= 16 * 16) {
      EXPECT_GE(chunks.load(), 8) << n;  // enough chunks to rebalance
    }
  }
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  int calls = 0;
  pool.ParallelFor(10, 1, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace fak
