#include "core/thread_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
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

// The caller returns only after every worker's part of the job is done and visible: whether the
// workers finish while the caller spins, or after it has gone to sleep (a worker slower than the spin),
// and with more threads than CPUs (workers descheduled mid-job).
TEST(ThreadPool, RunReturnsAfterEveryWorkerFinishedSpinningOrAsleep) {
  for (int threads : {2, 5, 9}) {
    ThreadPool pool(threads);
    std::vector<int> written(static_cast<size_t>(threads));  // plain ints: Run must order them
    for (int rep = 0; rep < 300; ++rep) {
      const bool slow = rep % 50 == 7;  // now and then one worker outlasts the caller's spin
      pool.Run([&](int i, int) {
        if (slow && i == threads - 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        written[static_cast<size_t>(i)] = rep;
      });
      for (int i = 0; i < threads; ++i)
        ASSERT_EQ(written[static_cast<size_t>(i)], rep) << threads << " " << i;
    }
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
