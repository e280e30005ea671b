#include "engine/scheduler.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/log.h"

namespace fak {

struct Scheduler::Job {
  std::shared_ptr<RequestHandle> handle;
  GenerationRequest req;
  std::unique_ptr<Sequence> seq;
  std::unique_ptr<RequestDecoder> decoder;
  std::vector<float> logits;
  int64_t cached = 0;  // prompt positions restored from the cache
  // Recurrent-state models: the prompt position where prefill pauses to keep a cache entry (a pinned
  // prefix, or where the prompt leaves a path other prompts took); 0: none.
  int64_t keep_at = 0;
  int64_t steps = 0;      // tokens sampled
  bool decoding = false;  // the prompt is in; next_token() is the token to run
  int32_t next = -1;
  std::vector<float> raw;  // logits before the sampler touches them (log-probabilities)
  std::vector<int32_t> order;
};

RequestDelta RequestHandle::Take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return done_ || !pending_.text.empty() || !pending_.tokens.empty(); });
  RequestDelta out = std::move(pending_);
  pending_ = RequestDelta{};
  if (done_) {  // a finished request keeps saying so
    pending_.finished = true;
    pending_.finish_reason = out.finish_reason;
    pending_.error = out.error;
    pending_.usage = out.usage;
  }
  return out;
}

Scheduler::Scheduler(Runtime& runtime, const Tokenizer& tokenizer, std::vector<int64_t> eos_ids,
                     SchedulerOptions options)
    : rt_(runtime), tokenizer_(tokenizer), eos_ids_(std::move(eos_ids)), options_(options), cache_(runtime) {
  options_.max_active = std::max<int64_t>(1, options_.max_active);
  options_.step_tokens = std::max<int64_t>(1, options_.step_tokens);
  options_.min_prefill = std::clamp<int64_t>(options_.min_prefill, 1, options_.step_tokens);
  // By default only beside a GPU backend: its cores are free while the device runs a step, whereas the
  // CPU backend's threads would share theirs with a pool that spins for a moment after each use.
  int sample_threads = options_.sample_threads;
  if (sample_threads == 0) {
    sample_threads = rt_.backend().name() != "cpu" ? std::min(DefaultThreadCount(), 8) : 1;
  }
  if (sample_threads > 1 && options_.max_active >= static_cast<int64_t>(kParallelSampling)) {
    post_pool_ = std::make_unique<ThreadPool>(sample_threads, /*pin=*/false);
  }
  // Logits buffers for the first requests, made now: a new one is vocabulary-sized memory touched for
  // the first time and registered with the backend (Backend::PinHost), about 0.3 ms on the CPU alone,
  // and admitting a burst of requests made them one after another on the scheduler's thread, ahead of
  // the step that runs their prompts.
  const int64_t prepared = std::min<int64_t>(options_.max_active, kPreparedLogitBuffers);
  for (int64_t i = 0; i < prepared; ++i) AddLogitBuffer();
  Publish();
  thread_ = std::thread([this] { Loop(); });
}

void Scheduler::AddLogitBuffer() {
  std::vector<float> b(static_cast<size_t>(rt_.vocab_size()));
  if (rt_.backend().PinHost(b.data(), b.size() * sizeof(float))) pinned_buffers_.push_back(b.data());
  logit_buffers_.push_back(std::move(b));
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  // Every request has ended and given its buffer back.
  for (float* p : pinned_buffers_) rt_.backend().UnpinHost(p);
}

Result<std::shared_ptr<RequestHandle>> Scheduler::Submit(GenerationRequest request) {
  const int64_t n = static_cast<int64_t>(request.prompt.size());
  if (n == 0) return InvalidArgument("the prompt is empty");
  const int64_t vocab = rt_.vocab_size();
  for (int32_t t : request.prompt) {
    if (t < 0 || t >= vocab) return InvalidArgument("token id {} is outside the vocabulary of {}", t, vocab);
  }
  if (n >= rt_.max_context()) {
    return OutOfRange("the prompt has {} tokens; the context holds {}, so at most {} fit with one generated",
                      n, rt_.max_context(), rt_.max_context() - 1);
  }
  if (request.limits.max_tokens < 0) return InvalidArgument("max_tokens must not be negative");
  request.limits.max_tokens = std::min(request.limits.max_tokens, rt_.max_context() - n);
  if (request.top_logprobs > 20) return InvalidArgument("top_logprobs is at most 20");
  request.pin_tokens = std::clamp<int64_t>(request.pin_tokens, 0, n);
  FAK_RETURN_IF_ERROR(RequestDecoder::Validate(request.sampling, request.limits));
  auto job = std::make_unique<Job>();
  job->handle = std::make_shared<RequestHandle>();
  job->req = std::move(request);
  std::shared_ptr<RequestHandle> h = job->handle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Busy("the server is shutting down");
    if (queued_.load() >= options_.max_queue) {
      return Busy("{} requests are waiting already (the queue holds {})", queued_.load(), options_.max_queue);
    }
    ++queued_;
    inbox_.push_back(std::move(job));
  }
  cv_.notify_all();
  return h;
}

Status Scheduler::PinPrefix(std::vector<int32_t> tokens) {
  GenerationRequest r;
  r.pin_tokens = static_cast<int64_t>(tokens.size());
  r.prompt = std::move(tokens);
  r.prefill_only = true;
  r.limits.max_tokens = 0;
  FAK_ASSIGN_OR_RETURN(auto h, Submit(std::move(r)));
  while (true) {
    RequestDelta d = h->Take(std::chrono::milliseconds(1000));
    if (d.finished) return d.finish_reason == "error" ? d.error : Status::Ok();
  }
}

void Scheduler::ClearCache() {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t ticket = ++clears_asked_;
  cv_.notify_all();
  cleared_.wait(lock, [&] { return stop_ || clears_done_ >= ticket; });
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerStats s = stats_;
  s.queued = queued_.load();
  return s;
}

void Scheduler::Publish() {
  std::lock_guard<std::mutex> lock(mu_);
  PublishLocked();
}

void Scheduler::PublishLocked() {
  KvPagePool& pool = rt_.kv_pool();
  stats_.active = static_cast<int64_t>(active_.size());
  stats_.kv_pages_total = pool.max_pages();
  stats_.kv_pages_free = pool.free_pages();
  stats_.kv_pages_used = pool.used_pages();
  stats_.steps = steps_;
  stats_.cache = cache_.stats();
}

namespace {

int64_t PagesFor(int64_t tokens, int64_t page) { return (tokens + page - 1) / page; }

std::string FinishReason(const std::string& decoder_reason) {
  return decoder_reason == "eos" || decoder_reason == "stop" || decoder_reason == "grammar" ? "stop"
                                                                                            : "length";
}

}  // namespace

int64_t Scheduler::PagesStillNeeded(const Job& job) const {
  const int64_t page = rt_.kv_pool().geometry().page_tokens;
  const int64_t final_size = static_cast<int64_t>(job.req.prompt.size()) + job.req.limits.max_tokens;
  const int64_t have = job.seq->size();
  int64_t need = PagesFor(final_size, page) - PagesFor(have, page);
  // A shared partial last page is copied before the first write into it.
  const auto& pages = job.seq->pages();
  if (have % page != 0 && !pages.empty() && rt_.kv_pool().refs(pages.back()) > 1) ++need;
  return std::max<int64_t>(need, 0);
}

void Scheduler::Finish(Job& job, std::string reason, Status error) {
  if (!job.logits.empty()) logit_buffers_.push_back(std::move(job.logits));  // for the next request
  if (job.seq && error.ok() && reason != "cancelled" && options_.prefix_cache && job.seq->size() > 0) {
    (void)cache_.Insert(*job.seq);  // a full snapshot store only costs the cache this entry
  }
  job.seq.reset();
  RequestDelta d;
  d.finished = true;
  d.finish_reason = std::move(reason);
  d.error = std::move(error);
  d.usage.prompt_tokens = static_cast<int64_t>(job.req.prompt.size());
  d.usage.cached_tokens = job.cached;
  d.usage.completion_tokens = job.steps;
  // Told after the step's statistics are published, so a caller that sees the end sees its pages back.
  ended_.emplace_back(job.handle, std::move(d));
}

void Scheduler::TellEnded() {
  for (auto& [h, d] : ended_) {
    {
      std::lock_guard<std::mutex> lock(h->mu_);
      RequestDelta& p = h->pending_;
      p.finished = true;
      p.finish_reason = std::move(d.finish_reason);
      p.error = std::move(d.error);
      p.usage = d.usage;
      h->done_ = true;
    }
    h->cv_.notify_all();
  }
  ended_.clear();
}

void Scheduler::Admit() {
  while (!waiting_.empty() && static_cast<int64_t>(active_.size()) < options_.max_active) {
    Job& job = *waiting_.front();
    if (!job.seq) {
      auto seq = rt_.NewSequence();
      if (!seq.ok()) break;  // state slots are used up: wait for a request to end
      job.seq = std::move(*seq);
    }
    const int64_t n = static_cast<int64_t>(job.req.prompt.size());
    // The last prompt token is always run: its logits give the first output token.
    job.cached = options_.prefix_cache ? cache_.Restore(job.req.prompt, n - 1, *job.seq) : 0;
    int64_t committed = 0;
    for (const auto& a : active_) committed += PagesStillNeeded(*a);
    const int64_t need = PagesStillNeeded(job) + committed;
    if (rt_.kv_pool().free_pages() < need && !cache_.EvictFor(need)) {
      if (active_.empty()) {
        const int64_t page = rt_.kv_pool().geometry().page_tokens;
        Status s = Busy(
            "the request needs {} KV pages ({} prompt tokens and up to {} generated, {} per page); "
            "the pool has {} pages and {} are held by pinned prefixes",
            PagesStillNeeded(job), n, job.req.limits.max_tokens, page, rt_.kv_pool().max_pages(),
            rt_.kv_pool().used_pages());
        std::unique_ptr<Job> dead = std::move(waiting_.front());
        waiting_.pop_front();
        --queued_;
        Finish(*dead, "error", s);
        continue;
      }
      job.seq->Truncate(0);  // keeps no cache pages while it waits
      break;
    }
    if (options_.prefix_cache) cache_.RecordLookup(n, job.cached);
    if (GetLogLevel() <= LogLevel::kDebug) {
      const auto now = std::chrono::steady_clock::now();
      FAK_LOG_DEBUG(
          "at {:.3f} ms: admitted a request of {} prompt tokens ({} cached) after {:.3f} ms in the queue",
          std::chrono::duration<double, std::milli>(now - born_).count(), n, job.cached,
          std::chrono::duration<double, std::milli>(now - job.handle->submitted()).count());
    }
    // A recurrent state exists only where a prefill stopped, so a prefix other prompts will share
    // must be kept as the prefill passes it: the pinned prefix, or the point where this prompt leaves
    // a path other prompts took (the next prompt that shares it then starts there).
    if (options_.prefix_cache && rt_.state_bytes() > 0) {
      const int64_t shared = cache_.SharedLength(job.req.prompt, n - 1);
      job.keep_at = job.req.pin_tokens > job.cached && job.req.pin_tokens < n ? job.req.pin_tokens
                    : shared > job.cached                                     ? shared
                                                                              : 0;
    }
    job.decoder = std::make_unique<RequestDecoder>(tokenizer_, eos_ids_, job.req.sampling, job.req.limits,
                                                   job.req.prompt);
    // A logits buffer from the pool, registered with the backend once (Backend::PinHost) so a GPU
    // backend downloads into it directly, and at an address the step's captured graphs already know.
    if (logit_buffers_.empty()) AddLogitBuffer();
    job.logits = std::move(logit_buffers_.back());
    logit_buffers_.pop_back();
    active_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    --queued_;
  }
}

void Scheduler::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (active_.empty() && waiting_.empty()) {
        const auto work = [&] { return stop_ || !inbox_.empty() || clears_asked_ > clears_done_; };
#ifdef __GLIBC__
        // Going idle: hand the heap's free pages back (glibc keeps them in every thread's arena, so a
        // burst of requests would otherwise leave the process at its high-water mark), and once more
        // half a second later, for what the HTTP threads freed after the last request ended.
        for (int trims = 0; trims < 2 && !work(); ++trims) {
          lock.unlock();
          malloc_trim(0);
          lock.lock();
          if (trims == 0) cv_.wait_for(lock, std::chrono::milliseconds(500), work);
        }
#endif
        cv_.wait(lock, work);
      }
      if (stop_) break;
      if (clears_asked_ > clears_done_) {
        cache_.Clear();
        PublishLocked();
        clears_done_ = clears_asked_;
        cleared_.notify_all();
      }
      while (!inbox_.empty()) {
        waiting_.push_back(std::move(inbox_.front()));
        inbox_.pop_front();
      }
    }
    // Cancelled requests end before anything else runs.
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if ((*it)->handle->cancelled()) {
        --queued_;
        Finish(**it, "cancelled");
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = active_.begin(); it != active_.end();) {
      if ((*it)->handle->cancelled()) {
        Finish(**it, "cancelled");
        it = active_.erase(it);
      } else {
        ++it;
      }
    }
    Admit();
    if (!active_.empty()) StepOnce();
    Publish();
    TellEnded();
  }
  // Shutting down: every request ends.
  std::lock_guard<std::mutex> lock(mu_);
  cleared_.notify_all();
  for (auto& j : inbox_) waiting_.push_back(std::move(j));
  inbox_.clear();
  for (auto& j : waiting_) Finish(*j, "cancelled");
  for (auto& j : active_) Finish(*j, "cancelled");
  waiting_.clear();
  active_.clear();
  TellEnded();
}

int64_t Scheduler::Checkpoint() const {
  return options_.prefix_cache && rt_.state_bytes() > 0 ? std::max<int64_t>(options_.state_checkpoint, 0) : 0;
}

Scheduler::Sampled Scheduler::SampleNext(Job& job) {
  Sampled out;
  const bool want_lp = job.req.top_logprobs >= 0;
  if (want_lp) job.raw = job.logits;
  out.text = job.decoder->Step(job.logits);
  if (!out.text.ok()) return out;
  TokenOut& tok = out.tok;
  tok.at = std::chrono::steady_clock::now();
  const bool ended = job.decoder->done();
  const auto& out_ids = job.decoder->output_ids();
  // The sampled token: the decoder's next token, or the one that ended the request (EOS is not
  // part of the output; a stop string's last token and a length limit's are).
  tok.id = !ended ? job.decoder->next_token()
                  : (job.decoder->stop_reason() == "eos" ? -1 : (out_ids.empty() ? -1 : out_ids.back()));
  if (want_lp && tok.id >= 0) {
    const auto& raw = job.raw;
    const float mx = *std::max_element(raw.begin(), raw.end());
    double sum = 0;
    for (float v : raw) sum += std::exp(static_cast<double>(v - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    tok.logprob = raw[static_cast<size_t>(tok.id)] - lse;
    const int k = job.req.top_logprobs;
    if (k > 0) {
      job.order.resize(raw.size());
      std::iota(job.order.begin(), job.order.end(), 0);
      std::partial_sort(job.order.begin(), job.order.begin() + k, job.order.end(), [&](int32_t a, int32_t b) {
        return raw[static_cast<size_t>(a)] > raw[static_cast<size_t>(b)] ||
               (raw[static_cast<size_t>(a)] == raw[static_cast<size_t>(b)] && a < b);
      });
      for (int i = 0; i < k; ++i) {
        const int32_t id = job.order[static_cast<size_t>(i)];
        tok.top.emplace_back(id, raw[static_cast<size_t>(id)] - lse);
      }
    }
  }
  return out;
}

void Scheduler::StepOnce() {
  work_.clear();
  std::vector<Job*> in_batch;
  for (auto& a : active_) {
    if (!a->decoding) continue;
    a->next = a->decoder->next_token();
    work_.push_back({a->seq.get(), std::span<const int32_t>(&a->next, 1), false, a->logits.data()});
    in_batch.push_back(a.get());
  }
  int64_t budget = work_.empty() ? std::max(options_.step_tokens, options_.idle_step_tokens)
                                 : std::max(options_.step_tokens - static_cast<int64_t>(work_.size()),
                                            options_.min_prefill);
  for (auto& a : active_) {
    if (a->decoding || budget <= 0) continue;
    const int64_t n = static_cast<int64_t>(a->req.prompt.size());
    const int64_t at = a->seq->size();
    int64_t chunk = std::min(n - at, budget);
    if (a->keep_at > at) chunk = std::min(chunk, a->keep_at - at);  // stop where an entry is kept
    if (const int64_t c = Checkpoint(); c > 0) chunk = std::min(chunk, (at / c + 1) * c - at);
    const bool last = at + chunk == n;
    work_.push_back(
        {a->seq.get(),
         std::span<const int32_t>(a->req.prompt).subspan(static_cast<size_t>(at), static_cast<size_t>(chunk)),
         false, last ? a->logits.data() : nullptr});
    in_batch.push_back(a.get());
    budget -= chunk;
  }
  ++steps_;
  const bool trace = GetLogLevel() <= LogLevel::kDebug;
  const auto t0 = trace ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  // Counted before the step, which turns prompts into decoding requests and ends others.
  const auto n_decode =
      trace ? std::count_if(in_batch.begin(), in_batch.end(), [](const Job* j) { return j->decoding; }) : 0;
  Status s = rt_.Forward(work_);
  const auto t1 = trace ? std::chrono::steady_clock::now() : t0;
  if (!s.ok()) {
    for (Job* j : in_batch) Finish(*j, "error", s);
    std::erase_if(active_, [](const auto& a) { return !a->seq; });
    return;
  }
  std::vector<Job*> sampling;  // requests whose logits this step give their next token
  for (Job* j : in_batch) {
    const int64_t n = static_cast<int64_t>(j->req.prompt.size());
    if (!j->decoding && j->keep_at > 0 && j->seq->size() == j->keep_at) {
      (void)cache_.Insert(*j->seq, j->keep_at == j->req.pin_tokens);
    } else if (!j->decoding && Checkpoint() > 0 && j->seq->size() % Checkpoint() == 0 && j->seq->size() < n) {
      (void)cache_.Insert(*j->seq);
    }
    if (!j->decoding && j->seq->size() < n) continue;  // more prompt to come
    if (!j->decoding) {
      // The prompt is in: cache it (pinned if asked) before anything is generated.
      if (options_.prefix_cache) {
        if (j->req.pin_tokens > 0 && rt_.state_bytes() == 0) {  // recurrent models kept it at keep_at
          auto tmp = rt_.NewSequence();
          if (tmp.ok()) {
            (*tmp)->Adopt(*j->seq, j->req.pin_tokens);
            (void)cache_.Insert(**tmp, true);
          }
        }
        if (j->req.pin_tokens < n) (void)cache_.Insert(*j->seq);
      }
      j->decoding = true;
      if (j->req.prefill_only) {
        Finish(*j, "length");
        continue;
      }
    }
    sampling.push_back(j);
  }
  // Each request's token from its logits. Requests sample independently (their own sampler, decoder and
  // logits), so several go to the pool at once: a greedy token over a 152k vocabulary is ~0.1 ms, and a
  // step of 32 decoding requests would otherwise spend longer on the host than on the GPU. A request
  // under a grammar samples on this thread: its automaton is shared with every request of the same
  // schema and grows as it is used.
  sampled_.clear();
  sampled_.resize(sampling.size());
  auto sample = [&](size_t k) { sampled_[k] = SampleNext(*sampling[k]); };
  if (sampling.size() >= kParallelSampling && post_pool_ != nullptr) {
    post_pool_->ParallelForDynamic(static_cast<int64_t>(sampling.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        if (sampling[static_cast<size_t>(k)]->req.limits.grammar == nullptr) sample(static_cast<size_t>(k));
      }
    });
    for (size_t k = 0; k < sampling.size(); ++k) {
      if (sampling[k]->req.limits.grammar != nullptr) sample(k);
    }
  } else {
    for (size_t k = 0; k < sampling.size(); ++k) sample(k);
  }
  for (size_t k = 0; k < sampling.size(); ++k) {
    Job* j = sampling[k];
    Sampled& out = sampled_[k];
    if (!out.text.ok()) {
      Finish(*j, "error", out.text.status());
      continue;
    }
    ++j->steps;
    const bool ended = j->decoder->done();
    std::string final_text = std::move(*out.text);
    bool context_end = false;
    if (!ended && j->seq->size() + 1 > rt_.max_context()) {
      final_text += j->decoder->EndAtContext();
      context_end = true;
    }
    {
      std::lock_guard<std::mutex> lock(j->handle->mu_);
      j->handle->pending_.text += final_text;
      if (out.tok.id >= 0) j->handle->pending_.tokens.push_back(std::move(out.tok));
    }
    j->handle->cv_.notify_all();
    if (ended || context_end) Finish(*j, FinishReason(j->decoder->stop_reason()));
  }
  std::erase_if(active_, [](const auto& a) { return !a->seq; });
  if (trace) {
    int64_t rows = 0;
    for (const auto& w : work_) rows += static_cast<int64_t>(w.tokens.size());
    const auto t2 = std::chrono::steady_clock::now();
    FAK_LOG_DEBUG(
        "at {:.3f} ms: step {}: {} requests ({} decoding), {} rows, forward {:.3f} ms, sampling {:.3f} ms",
        std::chrono::duration<double, std::milli>(t0 - born_).count(), steps_, in_batch.size(), n_decode,
        rows, std::chrono::duration<double, std::milli>(t1 - t0).count(),
        std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
}

}  // namespace fak
