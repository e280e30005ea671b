// A fixed pool of worker threads pinned to CPUs, for splitting kernels by rows. The caller is thread 0
// and works too; workers spin briefly for the next job before sleeping, so back-to-back kernel calls
// (one per matrix in a decode step) cost microseconds, not a wake-up each.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "core/status.h"

namespace fak {

// A non-owning reference to a callable, so handing a lambda to the pool allocates nothing (decode
// calls the pool a few hundred times per token). The callable must outlive the call.
template <typename Sig>
class FunctionRef;
template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
  requires(!std::is_same_v<std::decay_t<F>, FunctionRef>)
      FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): used like std::function
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(a...); }) {}
  R operator()(Args... a) const { return call_(obj_, a...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

// FAK_THREADS when set to a positive number, else the number of CPUs this process may run on.
int DefaultThreadCount();

// The thread count to use for `requested` (0 or less: DefaultThreadCount()), at most 4 per CPU: more
// only adds switching (-t 1000 ran 100x slower than -t 2). A capped request is logged as a warning.
int ThreadCountFor(int requested);

class ThreadPool {
 public:
  // n_threads counts the caller; n_threads - 1 workers are started. Workers are pinned to distinct
  // allowed CPUs when `pin` is set.
  explicit ThreadPool(int n_threads = DefaultThreadCount(), bool pin = true);
  // A pool of ThreadCountFor(requested) threads, or a Busy error naming the thread the system refused
  // to start (the constructor instead runs with the threads it could start).
  static Result<std::unique_ptr<ThreadPool>> Start(int requested, bool pin = true);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Empty, or why fewer threads than asked for are running (the system refused to start one).
  const std::string& start_error() const { return start_error_; }

  // Runs fn(thread_index, n_threads) once on every thread and returns when all are done.
  void Run(FunctionRef<void(int, int)> fn);

  // Splits [0, n) into one contiguous range per thread, boundaries at multiples of `grain`, and calls
  // fn(begin, end) for each non-empty range.
  void ParallelFor(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn);

  // Like ParallelFor, but [0, n) is cut into about 8 chunks per thread (multiples of `grain`) that the
  // threads claim as they go, so one thread delayed by other processes does not hold up the rest.
  void ParallelForDynamic(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn);

 private:
  void WorkerLoop(int index, int cpu);

  int n_threads_;
  std::string start_error_;
  std::vector<std::thread> workers_;
  const FunctionRef<void(int, int)>* job_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  // Worker i stores the generation it has finished in done_[i], a cache line of its own, so finishing
  // is one uncontended store rather than a read-modify-write of a line every worker shares (with 16
  // threads those queued up behind each other at every join). The caller reads the slots; when it has
  // spun long enough it sets caller_waiting_ and sleeps on wake_, which a worker finishing after that
  // bumps.
  struct alignas(64) DoneSlot {
    std::atomic<uint32_t> generation{0};
  };
  std::unique_ptr<DoneSlot[]> done_;
  // On lines of their own: idle workers poll generation_, which a bump of wake_ would take from them.
  alignas(64) std::atomic<uint32_t> caller_waiting_{0};
  alignas(64) std::atomic<uint32_t> wake_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace fak
