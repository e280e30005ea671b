// A fixed pool of worker threads pinned to CPUs, for splitting kernels by rows. The caller is thread 0
// and works too; workers spin briefly for the next job before sleeping, so back-to-back kernel calls
// (one per matrix in a decode step) cost microseconds, not a wake-up each.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace fak::cpu {

// FAK_THREADS when set to a positive number, else the number of CPUs this process may run on.
int DefaultThreadCount();

class ThreadPool {
 public:
  // n_threads counts the caller; n_threads - 1 workers are started. Workers are pinned to distinct
  // allowed CPUs when `pin` is set.
  explicit ThreadPool(int n_threads = DefaultThreadCount(), bool pin = true);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(thread_index, n_threads) once on every thread and returns when all are done.
  void Run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into one contiguous range per thread, boundaries at multiples of `grain`, and calls
  // fn(begin, end) for each non-empty range.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index, int cpu);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace fak::cpu
