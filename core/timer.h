// Monotonic wall-clock timing, and the CPU time of the process.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace fak {

inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Nanoseconds as milliseconds.
inline double Ms(int64_t ns) { return static_cast<double>(ns) * 1e-6; }

// Seconds of CPU time all the process's threads have used.
inline double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

class Timer {
 public:
  Timer() : start_(NowNanos()) {}
  void Reset() { start_ = NowNanos(); }
  int64_t Nanos() const { return NowNanos() - start_; }
  double Millis() const { return static_cast<double>(Nanos()) * 1e-6; }
  double Seconds() const { return static_cast<double>(Nanos()) * 1e-9; }

 private:
  int64_t start_;
};

}  // namespace fak
