// The scheduler: many requests over one runtime, with continuous batching and the prefix cache.
//
// One thread owns the runtime. Every step it runs, in one ragged batch, the next token of every
// request that is decoding and chunks of the prompts still being read (chunked prefill: a long prompt
// takes at most the step's token budget, so the others' decode waits one step at most). A request is
// admitted when its worst case fits the KV pool — the pages it may still need up to its last token,
// counted against what the running requests may still need — evicting unpinned cache entries first;
// otherwise it waits in a bounded queue. A request restores the longest cached prefix of its prompt
// and computes the rest; its prompt, and when it ends its whole context, go into the cache.
//
// Callers submit from any thread and read a request's output from its handle; Cancel (a client that
// went away) ends it at the next step and frees its pages.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/decoder.h"
#include "engine/prefix_cache.h"
#include "engine/runtime.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace fak {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  DecodeLimits limits;
  int top_logprobs = -1;      // -1: no log-probabilities; 0: the chosen token's; k: and the k likeliest
  int64_t pin_tokens = 0;     // pin the prompt's first pin_tokens positions in the prefix cache
  bool prefill_only = false;  // compute (and cache) the prompt, generate nothing
};

struct TokenOut {
  int32_t id = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // the likeliest tokens and their log-probabilities
  std::chrono::steady_clock::time_point at;
};

struct RequestUsage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt positions restored from the prefix cache
  int64_t completion_tokens = 0;
};

// What a request produced since the last Take.
struct RequestDelta {
  std::string text;  // final text (stop strings already cut)
  std::vector<TokenOut> tokens;
  bool finished = false;
  std::string finish_reason;  // "stop", "length", "cancelled", "error"
  Status error;               // when finish_reason is "error"
  RequestUsage usage;         // set when finished
};

class RequestHandle {
 public:
  // Waits up to `timeout` for output and takes everything produced since the last call.
  RequestDelta Take(std::chrono::milliseconds timeout);
  // Ends the request at the scheduler's next step; its pages are freed.
  void Cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  std::chrono::steady_clock::time_point submitted() const { return submitted_; }

 private:
  friend class Scheduler;
  std::mutex mu_;
  std::condition_variable cv_;
  RequestDelta pending_;
  bool done_ = false;
  std::atomic<bool> cancelled_{false};
  std::chrono::steady_clock::time_point submitted_ = std::chrono::steady_clock::now();
};

struct SchedulerOptions {
  int64_t max_active = 16;    // requests decoding or prefilling at once
  int64_t max_queue = 64;     // requests waiting for admission; beyond it Submit refuses
  int64_t step_tokens = 256;  // token budget of one step (decode rows and prefill chunks)
  int64_t min_prefill = 32;   // prefill tokens a step runs even when decode rows fill the budget
  // Token budget of a step with no decode rows: nothing waits on it, so a lone prompt goes in larger
  // chunks (fewer passes over the weights).
  int64_t idle_step_tokens = 512;
  // Threads that sample a step's requests (from 4 requests up); 0: up to 8 beside a GPU backend, one
  // beside the CPU backend (whose threads have the cores).
  int sample_threads = 0;
  bool prefix_cache = true;
  // Recurrent-state models: a prefill also keeps a cache entry every this many prompt tokens, so a
  // prompt that shares a prefix with an earlier one restores a state at most this far before the
  // shared part ends, even when they arrive together (0: only where prompts part and at pins).
  int64_t state_checkpoint = 256;
};

struct SchedulerStats {
  int64_t queued = 0;
  int64_t active = 0;
  int64_t kv_pages_used = 0;
  int64_t kv_pages_free = 0;
  int64_t kv_pages_total = 0;
  int64_t steps = 0;
  PrefixCacheStats cache;
};

class Scheduler {
 public:
  // eos_ids: the model's end-of-sequence ids besides the tokenizer's.
  Scheduler(Runtime& runtime, const Tokenizer& tokenizer, std::vector<int64_t> eos_ids,
            SchedulerOptions options);
  ~Scheduler();  // ends every request ("cancelled") and stops the thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. InvalidArgument for a bad prompt or parameters (named), OutOfRange when the
  // prompt does not fit the context, ResourceExhausted when the queue is full.
  Result<std::shared_ptr<RequestHandle>> Submit(GenerationRequest request);
  // Computes `tokens` and pins them in the prefix cache; waits until done.
  Status PinPrefix(std::vector<int32_t> tokens);
  // Drops every unpinned prefix-cache entry; waits until done.
  void ClearCache();

  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return options_; }
  int64_t max_context() const { return rt_.max_context(); }

 private:
  struct Job;
  void Loop();
  void Admit();
  void AddLogitBuffer();  // a new logits buffer into logit_buffers_, registered with the backend if it can
  void StepOnce();
  // The prefill checkpoint interval in force: options_.state_checkpoint with recurrent state and the
  // prefix cache on, else 0.
  int64_t Checkpoint() const;
  void Finish(Job& job, std::string reason, Status error = Status::Ok());
  int64_t PagesStillNeeded(const Job& job) const;
  void Publish();
  void PublishLocked();  // mu_ held
  void TellEnded();
  // A step's outcome for one request: its decoded text (or why not) and the token sampled.
  struct Sampled {
    Result<std::string> text = std::string();
    TokenOut tok;
  };
  // Samples the request's next token from its logits; touches only the request's own state.
  static Sampled SampleNext(Job& job);
  static constexpr size_t kParallelSampling = 4;  // requests in a step before sampling goes to the pool

  Runtime& rt_;
  const Tokenizer& tokenizer_;
  std::vector<int64_t> eos_ids_;
  SchedulerOptions options_;
  PrefixCache cache_;

  mutable std::mutex mu_;  // inbox_, stats_, stop_
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> inbox_;
  bool stop_ = false;
  int64_t clears_asked_ = 0, clears_done_ = 0;
  std::condition_variable cleared_;
  std::atomic<int64_t> queued_{0};
  SchedulerStats stats_;

  // The scheduler thread's own.
  std::deque<std::unique_ptr<Job>> waiting_;
  std::vector<std::unique_ptr<Job>> active_;
  std::vector<SeqWork> work_;
  std::vector<Sampled> sampled_;
  // Logits buffers of ended requests, kept for the next ones (moving a vector keeps its memory, so a
  // buffer registered with the backend stays registered); pinned_buffers_ are the registered ones.
  std::vector<std::vector<float>> logit_buffers_;
  static constexpr int64_t kPreparedLogitBuffers = 64;  // made at construction (at most max_active)
  std::vector<float*> pinned_buffers_;
  std::unique_ptr<ThreadPool> post_pool_;  // samples the requests of a step in parallel (null: one CPU)
  std::vector<std::pair<std::shared_ptr<RequestHandle>, RequestDelta>> ended_;
  int64_t steps_ = 0;
  const std::chrono::steady_clock::time_point born_ = std::chrono::steady_clock::now();  // for the debug log
  std::thread thread_;
};

}  // namespace fak
