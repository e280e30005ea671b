// The server's counters and histograms, written out in the Prometheus text format (GET /metrics).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/scheduler.h"

namespace fak::server {

// Cumulative buckets over fixed upper bounds (seconds), as Prometheus expects.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void Observe(double v);
  // The `name_bucket`, `name_sum` and `name_count` lines.
  void Write(const std::string& name, const std::string& help, std::string* out) const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void CountRequest(const std::string& endpoint, int status);
  void AddTokens(int64_t prompt, int64_t cached, int64_t generated);
  void ObserveTtft(double seconds) { ttft_.Observe(seconds); }
  void ObserveItl(double seconds) { itl_.Observe(seconds); }
  void ObserveDuration(double seconds) { duration_.Observe(seconds); }
  void CountDisconnect();

  // Everything, with the scheduler's gauges (null before the model is loaded).
  std::string Render(const SchedulerStats* sched) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_tokens_ = 0, disconnects_ = 0;
  Histogram ttft_, itl_, duration_;
};

}  // namespace fak::server
