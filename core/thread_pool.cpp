#include "core/thread_pool.h"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>

#include "core/log.h"

#include <pthread.h>
#include <sched.h>

#include <cstdlib>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace fak {
namespace {

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int i = 0; i < CPU_SETSIZE; ++i) {
      if (CPU_ISSET(i, &set)) cpus.push_back(i);
    }
  }
  return cpus;
}

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a waiting thread spins before it sleeps: enough to cover the gap between two kernels of a
// decode step.
constexpr int kSpinIterations = 1 << 13;

}  // namespace

int DefaultThreadCount() {
  if (const char* env = std::getenv("FAK_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  const size_t n = AllowedCpus().size();
  return n > 0 ? static_cast<int>(n) : 1;
}

int ThreadCountFor(int requested) {
  const int cpus = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int threads = requested > 0 ? requested : DefaultThreadCount();
  if (threads <= 4 * cpus) return threads;
  FAK_LOG_WARN("{} threads asked for, more than 4 per CPU ({} CPUs): using {}", threads, cpus, 4 * cpus);
  return 4 * cpus;
}

Result<std::unique_ptr<ThreadPool>> ThreadPool::Start(int requested, bool pin) {
  const int threads = ThreadCountFor(requested);
  auto pool = std::make_unique<ThreadPool>(threads, pin);
  if (pool->size() < threads) {
    return Busy("only {} of {} threads could start ({})", pool->size(), threads, pool->start_error());
  }
  return pool;
}

ThreadPool::ThreadPool(int n_threads, bool pin)
    : n_threads_(n_threads < 1 ? 1 : n_threads),
      done_(std::make_unique<DoneSlot[]>(static_cast<size_t>(n_threads_))) {
  const std::vector<int> cpus = pin ? AllowedCpus() : std::vector<int>();
  for (int i = 1; i < n_threads_; ++i) {
    // Workers take CPUs from the end of the allowed set; the caller usually runs on the first.
    const int cpu =
        cpus.empty() ? -1 : cpus[(cpus.size() - static_cast<size_t>(i) % cpus.size()) % cpus.size()];
    try {
      workers_.emplace_back([this, i, cpu] { WorkerLoop(i, cpu); });
    } catch (const std::system_error& e) {
      // The system refused another thread: run with those started, and say so (started()).
      start_error_ = fmt::format("cannot start thread {} of {}: {}", i + 1, n_threads_, e.what());
      n_threads_ = i;
      break;
    }
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(int index, int cpu) {
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < kSpinIterations; ++spin) {
      CpuRelax();
      if ((spin & 255) == 255) std::this_thread::yield();  // oversubscribed: let the others run
      g = generation_.load(std::memory_order_acquire);
    }
    while (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index, n_threads_);
    // Sequentially consistent, with the caller's store of caller_waiting_ and its reads of the slots:
    // either the caller sees this slot, or this thread sees it waiting and wakes it.
    done_[static_cast<size_t>(index)].generation.store(g, std::memory_order_seq_cst);
    if (caller_waiting_.load(std::memory_order_seq_cst) != 0) {
      wake_.fetch_add(1, std::memory_order_release);
      wake_.notify_one();
    }
  }
}

void ThreadPool::Run(FunctionRef<void(int, int)> fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  const uint32_t g = generation_.fetch_add(1, std::memory_order_acq_rel) + 1;
  generation_.notify_all();
  fn(0, n_threads_);
  // Workers [first, n) may still be running; the ones before have finished generation g.
  int first = 1;
  auto finished = [&](std::memory_order order) {
    while (first < n_threads_ && done_[static_cast<size_t>(first)].generation.load(order) == g) ++first;
    return first == n_threads_;
  };
  for (int spin = 0; !finished(std::memory_order_acquire); ++spin) {
    if (spin >= kSpinIterations) {
      caller_waiting_.store(1, std::memory_order_seq_cst);
      for (;;) {
        const uint32_t w = wake_.load(std::memory_order_acquire);
        if (finished(std::memory_order_seq_cst)) break;
        wake_.wait(w, std::memory_order_acquire);
      }
      caller_waiting_.store(0, std::memory_order_relaxed);
      return;
    }
    CpuRelax();
    if ((spin & 255) == 255) std::this_thread::yield();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  if (grain < 1) grain = 1;
  const int64_t units = (n + grain - 1) / grain;
  const int64_t parts = units < n_threads_ ? units : n_threads_;
  if (parts <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  Run([&](int index, int) {
    if (index >= parts) return;
    const int64_t u0 = units * index / parts, u1 = units * (index + 1) / parts;
    const int64_t b = u0 * grain, e = u1 * grain < n ? u1 * grain : n;
    if (b < e) fn(b, e);
  });
}

void ThreadPool::ParallelForDynamic(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  if (grain < 1) grain = 1;
  const int64_t units = (n + grain - 1) / grain;
  if (units <= 1 || n_threads_ == 1) {
    if (n > 0) fn(0, n);
    return;
  }
  const int64_t per_chunk = (units + 8 * n_threads_ - 1) / (8 * n_threads_);
  const int64_t chunk = per_chunk * grain;
  std::atomic<int64_t> next{0};
  Run([&](int, int) {
    for (;;) {
      const int64_t b = next.fetch_add(chunk, std::memory_order_relaxed);
      if (b >= n) return;
      fn(b, b + chunk < n ? b + chunk : n);
    }
  });
}

}  // namespace fak
