// The scheduler: requests decoded together, with prefixes from the cache, give the tokens and
// log-probabilities they give alone with nothing cached; cancellation, a full queue and a request
// too large for the pool are handled, and every page comes back.
#include "engine/scheduler.h"
#include "engine/test_fixtures.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "tokenizer/loader.h"

namespace fak {
namespace {

struct Output {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::string text;
  std::string reason;
  RequestUsage usage;
};

Output Drain(RequestHandle& h) {
  Output o;
  while (true) {
    RequestDelta d = h.Take(std::chrono::milliseconds(2000));
    o.text += d.text;
    for (const auto& t : d.tokens) {
      o.ids.push_back(t.id);
      o.logprobs.push_back(t.logprob);
    }
    if (d.finished) {
      o.reason = d.finish_reason;
      o.usage = d.usage;
      EXPECT_TRUE(d.error.ok()) << d.error.ToString();
      return o;
    }
  }
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = LoadModel(kTinyLlama);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    auto tok = LoadTokenizer(kTinyLlama);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tok_ = std::make_unique<Tokenizer>(std::move(*tok));
    vocab_ = model_->config.vocab_size;
  }

  std::unique_ptr<Runtime> MakeRuntime(int64_t pages) {
    auto rt = Runtime::Create(
        *model_,
        RuntimeOptions{.max_context = 128, .kv_pages = pages, .page_tokens = 8, .backend = {.threads = 2}});
    EXPECT_TRUE(rt.ok()) << rt.status().ToString();
    return std::move(*rt);
  }

  std::vector<int32_t> Tokens(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = 3 + static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab_ - 3));
    return t;
  }

  GenerationRequest Request(std::vector<int32_t> prompt, int64_t max_tokens, float temperature,
                            uint64_t seed) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.limits.max_tokens = max_tokens;
    r.limits.ignore_eos = true;
    r.sampling.temperature = temperature;
    r.sampling.seed = seed;
    r.top_logprobs = 0;
    return r;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  int64_t vocab_ = 0;
};

TEST_F(SchedulerTest, RequestsTogetherAndFromTheCacheDecodeAsAloneWithoutIt) {
  const std::vector<int32_t> preamble = Tokens(37, 1);
  std::vector<GenerationRequest> reqs;
  for (uint32_t i = 0; i < 8; ++i) {
    std::vector<int32_t> p = preamble;
    for (int32_t t : Tokens(3 + i * 2, 50 + i)) p.push_back(t);
    // Half greedy, half sampled with a seed.
    reqs.push_back(Request(p, 12, i % 2 == 0 ? 0.0f : 0.9f, 1000 + i));
  }
  // Alone, nothing cached.
  std::vector<Output> alone;
  {
    auto rt = MakeRuntime(64);
    Scheduler s(*rt, *tok_, {}, SchedulerOptions{.max_active = 1, .prefix_cache = false});
    for (const auto& r : reqs) {
      auto h = s.Submit(r);
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      alone.push_back(Drain(**h));
      EXPECT_EQ(alone.back().usage.cached_tokens, 0);
    }
  }
  // All at once, a small step budget (prefill in chunks beside the others' decode), with the cache.
  auto rt = MakeRuntime(200);
  // Sampled on two threads (the pool a GPU backend gets), so the requests' sampling runs concurrently.
  Scheduler s(*rt, *tok_, {},
              SchedulerOptions{.max_active = 8, .step_tokens = 24, .min_prefill = 8, .sample_threads = 2});
  auto first = s.Submit(reqs[0]);
  ASSERT_TRUE(first.ok());
  Output o0 = Drain(**first);
  EXPECT_EQ(o0.ids, alone[0].ids);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (size_t i = 1; i < reqs.size(); ++i) {
    auto h = s.Submit(reqs[i]);
    ASSERT_TRUE(h.ok());
    hs.push_back(*h);
  }
  for (size_t i = 1; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    Output o = Drain(*hs[i - 1]);
    EXPECT_EQ(o.reason, "length");
    EXPECT_EQ(o.ids, alone[i].ids);
    EXPECT_EQ(o.logprobs, alone[i].logprobs);  // bit for bit
    EXPECT_EQ(o.text, alone[i].text);
    EXPECT_EQ(o.usage.prompt_tokens, static_cast<int64_t>(reqs[i].prompt.size()));
    EXPECT_GE(o.usage.cached_tokens, static_cast<int64_t>(preamble.size()));
    EXPECT_EQ(o.usage.completion_tokens, 12);
  }
  // Every page is the cache's; dropping it returns them all.
  EXPECT_EQ(s.stats().active, 0);
  s.ClearCache();
  EXPECT_EQ(s.stats().kv_pages_used, 0);
}

TEST_F(SchedulerTest, CancelledRequestsEndAndGiveTheirPagesBack) {
  auto rt = MakeRuntime(64);
  Scheduler s(*rt, *tok_, {}, SchedulerOptions{.max_active = 4, .prefix_cache = false});
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (uint32_t i = 0; i < 6; ++i) {
    auto h = s.Submit(Request(Tokens(20, i), 100, 0.0f, 0));
    ASSERT_TRUE(h.ok());
    hs.push_back(*h);
  }
  for (auto& h : hs) h->Cancel();
  for (auto& h : hs) {
    Output o = Drain(*h);
    EXPECT_EQ(o.reason, "cancelled");
  }
  EXPECT_EQ(s.stats().kv_pages_used, 0);
  EXPECT_EQ(s.stats().queued, 0);
}

TEST_F(SchedulerTest, AFullQueueAndAnOversizedRequestAreRefusedByName) {
  auto rt = MakeRuntime(8);  // 64 positions in all
  Scheduler s(*rt, *tok_, {}, SchedulerOptions{.max_active = 1, .max_queue = 2, .prefix_cache = false});
  // Needs 10 pages: refused, named, and nothing else is affected.
  auto big = s.Submit(Request(Tokens(40, 1), 40, 0.0f, 0));
  ASSERT_TRUE(big.ok());
  RequestDelta d;
  do d = (*big)->Take(std::chrono::milliseconds(2000));
  while (!d.finished);
  EXPECT_EQ(d.finish_reason, "error");
  EXPECT_EQ(d.error.code(), StatusCode::kBusy);
  EXPECT_NE(d.error.message().find("needs 10 KV pages"), std::string::npos) << d.error.message();

  // Prompt beyond the context: refused at once with the counts.
  auto over = s.Submit(Request(Tokens(130, 2), 4, 0.0f, 0));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(over.status().message().find("130 tokens"), std::string::npos);
  EXPECT_EQ(s.Submit(Request({}, 4, 0.0f, 0)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Submit(Request({static_cast<int32_t>(vocab_)}, 4, 0.0f, 0)).status().code(),
            StatusCode::kInvalidArgument);

  // One running (all the pool it may need), then the queue fills and refuses.
  std::vector<std::shared_ptr<RequestHandle>> hs;
  int busy = 0;
  for (uint32_t i = 0; i < 8; ++i) {
    auto h = s.Submit(Request(Tokens(30, 10 + i), 30, 0.0f, 0));
    if (h.ok()) {
      hs.push_back(*h);
    } else {
      EXPECT_EQ(h.status().code(), StatusCode::kBusy);
      ++busy;
    }
  }
  EXPECT_GT(busy, 0);
  for (auto& h : hs) EXPECT_EQ(Drain(*h).reason, "length");
  EXPECT_EQ(s.stats().kv_pages_used, 0);
}

}  // namespace
}  // namespace fak
