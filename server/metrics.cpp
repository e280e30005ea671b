#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace fak::server {

void Histogram::Observe(double v) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::Write(const std::string& name, const std::string& help, std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  *out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    *out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  cum += counts_.back();
  *out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cum, name, sum_, name,
                      count_);
}

namespace {

std::vector<double> LatencyBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

void Gauge(const char* name, const char* help, const char* type, double v, std::string* out) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, v);
}

}  // namespace

Metrics::Metrics() : ttft_(LatencyBounds()), itl_(LatencyBounds()), duration_(LatencyBounds()) {}

void Metrics::CountRequest(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::AddTokens(int64_t prompt, int64_t cached, int64_t generated) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += prompt;
  cached_tokens_ += cached;
  generated_tokens_ += generated;
}

void Metrics::CountDisconnect() {
  std::lock_guard<std::mutex> lock(mu_);
  ++disconnects_;
}

std::string Metrics::Render(const SchedulerStats* s) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out += "# HELP fak_requests_total HTTP requests answered, by endpoint and status code\n";
    out += "# TYPE fak_requests_total counter\n";
    for (const auto& [key, n] : requests_) {
      out +=
          fmt::format("fak_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
    }
    Gauge("fak_prompt_tokens_total", "Prompt tokens of finished requests", "counter",
          static_cast<double>(prompt_tokens_), &out);
    Gauge("fak_prompt_cached_tokens_total", "Prompt tokens restored from the prefix cache", "counter",
          static_cast<double>(cached_tokens_), &out);
    Gauge("fak_generation_tokens_total", "Generated tokens", "counter",
          static_cast<double>(generated_tokens_), &out);
    Gauge("fak_client_disconnects_total", "Streams whose client went away before the end", "counter",
          static_cast<double>(disconnects_), &out);
  }
  ttft_.Write("fak_time_to_first_token_seconds", "Time from request to first generated token", &out);
  itl_.Write("fak_inter_token_latency_seconds", "Time between consecutive generated tokens of a request",
             &out);
  duration_.Write("fak_request_duration_seconds", "Time from request to its last token", &out);
  if (s != nullptr) {
    Gauge("fak_queue_depth", "Requests waiting for admission", "gauge", static_cast<double>(s->queued), &out);
    Gauge("fak_requests_running", "Requests prefilling or decoding", "gauge", static_cast<double>(s->active),
          &out);
    Gauge("fak_kv_pages_used", "KV pages in use (running requests and the prefix cache)", "gauge",
          static_cast<double>(s->kv_pages_used), &out);
    Gauge("fak_kv_pages_free", "KV pages free", "gauge", static_cast<double>(s->kv_pages_free), &out);
    Gauge("fak_kv_pages_total", "KV pages in the pool (--kv-budget)", "gauge",
          static_cast<double>(s->kv_pages_total), &out);
    Gauge("fak_scheduler_steps_total", "Batches run", "counter", static_cast<double>(s->steps), &out);
    const PrefixCacheStats& c = s->cache;
    Gauge("fak_prefix_cache_entries", "Contexts kept in the prefix cache", "gauge",
          static_cast<double>(c.entries), &out);
    Gauge("fak_prefix_cache_pinned_tokens", "Tokens of pinned prefixes", "gauge",
          static_cast<double>(c.pinned_tokens), &out);
    Gauge("fak_prefix_cache_lookup_tokens_total", "Prompt tokens looked up in the prefix cache", "counter",
          static_cast<double>(c.lookup_tokens), &out);
    Gauge("fak_prefix_cache_hit_tokens_total", "Prompt tokens found in the prefix cache", "counter",
          static_cast<double>(c.hit_tokens), &out);
    Gauge(
        "fak_prefix_cache_hit_ratio", "Hit tokens over looked-up tokens", "gauge",
        c.lookup_tokens > 0 ? static_cast<double>(c.hit_tokens) / static_cast<double>(c.lookup_tokens) : 0.0,
        &out);
    Gauge("fak_prefix_cache_evictions_total", "Prefix-cache entries evicted", "counter",
          static_cast<double>(c.evictions), &out);
  }
  return out;
}

}  // namespace fak::server
