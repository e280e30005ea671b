// Monotonic wall-clock timing.
#pragma once

#include <chrono>
#include <cstdint>

namespace fak {

inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
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
