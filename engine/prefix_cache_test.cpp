// The radix prefix cache: token-granular longest-prefix matching, exact logits from a restored
// prefix, LRU eviction that spares pinned entries, and no page left behind.
#include "engine/prefix_cache.h"
#include "engine/test_fixtures.h"

#include <gtest/gtest.h>

#include <random>

namespace fak {
namespace {

class PrefixCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = LoadModel(kTinyLlama);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    auto rt = Runtime::Create(
        *model_,
        RuntimeOptions{.max_context = 64, .kv_pages = 40, .page_tokens = 4, .backend = {.threads = 1}});
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    rt_ = std::move(*rt);
    vocab_ = model_->config.vocab_size;
  }

  std::unique_ptr<Sequence> Run(const std::vector<int32_t>& tokens, std::vector<float>* logits = nullptr) {
    auto seq = rt_->NewSequence();
    EXPECT_TRUE(seq.ok());
    std::vector<float> out(tokens.size() * static_cast<size_t>(vocab_));
    SeqWork w{seq->get(), tokens, true, out.data()};
    EXPECT_TRUE(rt_->Forward({&w, 1}).ok());
    if (logits != nullptr) *logits = std::move(out);
    return std::move(*seq);
  }

  std::vector<int32_t> Tokens(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab_));
    return t;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Runtime> rt_;
  int64_t vocab_ = 0;
};

TEST_F(PrefixCacheTest, MatchesTheLongestPrefixTokenByToken) {
  PrefixCache cache(*rt_);
  std::vector<int32_t> a = Tokens(20, 1);
  std::vector<int32_t> b(a.begin(), a.begin() + 13);
  for (int32_t t : Tokens(9, 2)) b.push_back(t);
  b[13] = (a[13] + 1) % static_cast<int32_t>(vocab_);  // b parts from a after 13 tokens
  ASSERT_TRUE(cache.Insert(*Run(a)).ok());
  ASSERT_TRUE(cache.Insert(*Run(b)).ok());
  EXPECT_EQ(cache.stats().entries, 2);

  EXPECT_EQ(cache.MatchLength(a, 100), 20);
  EXPECT_EQ(cache.MatchLength(a, 19), 19);
  EXPECT_EQ(cache.MatchLength(b, 100), 22);
  std::vector<int32_t> c(a.begin(), a.begin() + 7);  // ends inside the shared edge
  c.push_back((a[7] + 5) % static_cast<int32_t>(vocab_));
  EXPECT_EQ(cache.MatchLength(c, 100), 7);
  std::vector<int32_t> d(b.begin(), b.begin() + 17);  // inside b's own edge
  d.push_back((b[17] + 1) % static_cast<int32_t>(vocab_));
  EXPECT_EQ(cache.MatchLength(d, 100), 17);
  std::vector<int32_t> e = {(a[0] + 1) % static_cast<int32_t>(vocab_)};
  EXPECT_EQ(cache.MatchLength(e, 100), 0);

  auto seq = rt_->NewSequence();
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(cache.Restore(d, 100, **seq), 17);
  EXPECT_EQ((*seq)->size(), 17);
  cache.RecordLookup(static_cast<int64_t>(d.size()), 17);
  EXPECT_EQ(std::vector<int32_t>((*seq)->tokens()), std::vector<int32_t>(d.begin(), d.begin() + 17));
  const PrefixCacheStats st = cache.stats();
  EXPECT_EQ(st.lookups, 1);
  EXPECT_EQ(st.hit_tokens, 17);
}

TEST_F(PrefixCacheTest, ARestoredPrefixGivesTheLogitsOfTheWholePromptRunAtOnce) {
  PrefixCache cache(*rt_);
  std::vector<int32_t> preamble = Tokens(23, 3);
  ASSERT_TRUE(cache.Insert(*Run(preamble)).ok());
  for (int64_t cut : {5, 8, 23}) {
    SCOPED_TRACE(cut);
    std::vector<int32_t> prompt(preamble.begin(), preamble.begin() + cut);
    for (int32_t t : Tokens(9, static_cast<uint32_t>(10 + cut))) prompt.push_back(t);
    std::vector<float> want;
    Run(prompt, &want);

    auto seq = rt_->NewSequence();
    ASSERT_TRUE(seq.ok());
    const int64_t hit = cache.Restore(prompt, static_cast<int64_t>(prompt.size()) - 1, **seq);
    ASSERT_EQ(hit, cut);
    std::span<const int32_t> rest(prompt.data() + hit, prompt.size() - static_cast<size_t>(hit));
    std::vector<float> got(rest.size() * static_cast<size_t>(vocab_));
    SeqWork w{seq->get(), rest, true, got.data()};
    ASSERT_TRUE(rt_->Forward({&w, 1}).ok());
    // Bit for bit: every computed position's logits equal the same position's in the full run.
    ASSERT_EQ(0, std::memcmp(got.data(), want.data() + static_cast<size_t>(hit * vocab_),
                             got.size() * sizeof(float)));
  }
  // Writing after a shared partial page copied it: the cached entry still matches in full.
  EXPECT_EQ(cache.MatchLength(preamble, 100), 23);
}

TEST_F(PrefixCacheTest, EvictsLeastRecentlyUsedUnpinnedEntriesAndFreesTheirPages) {
  KvPagePool& pool = rt_->kv_pool();
  {
    PrefixCache cache(*rt_);
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 4; ++i) prompts.push_back(Tokens(16, 100 + i));  // 4 pages each
    ASSERT_TRUE(cache.Insert(*Run(prompts[0]), /*pinned=*/true).ok());
    for (int i = 1; i < 4; ++i) ASSERT_TRUE(cache.Insert(*Run(prompts[static_cast<size_t>(i)])).ok());
    EXPECT_EQ(pool.used_pages(), 16);
    // Touch entry 1 so that entry 2 is the least recently used.
    auto seq = rt_->NewSequence();
    ASSERT_TRUE(seq.ok());
    EXPECT_EQ(cache.Restore(prompts[1], 15, **seq), 15);
    (*seq)->Truncate(0);

    ASSERT_TRUE(cache.EvictFor(pool.max_pages() - 16 + 4));  // one entry's worth
    EXPECT_EQ(cache.stats().evictions, 1);
    EXPECT_EQ(cache.MatchLength(prompts[2], 100), 0);
    EXPECT_EQ(cache.MatchLength(prompts[1], 100), 16);
    EXPECT_EQ(cache.MatchLength(prompts[3], 100), 16);
    // More than the unpinned entries hold: everything unpinned goes, the pinned entry stays.
    EXPECT_FALSE(cache.EvictFor(pool.max_pages()));
    EXPECT_EQ(cache.MatchLength(prompts[0], 100), 16);
    EXPECT_EQ(cache.stats().entries, 1);
    EXPECT_EQ(cache.stats().pinned_tokens, 16);
    EXPECT_EQ(pool.used_pages(), 4);
    cache.Clear();  // keeps pinned entries
    EXPECT_EQ(pool.used_pages(), 4);
  }
  EXPECT_EQ(pool.used_pages(), 0);
}

TEST_F(PrefixCacheTest, InsertingTheSameTokensTwiceKeepsOneEntry) {
  PrefixCache cache(*rt_);
  std::vector<int32_t> a = Tokens(10, 7);
  ASSERT_TRUE(cache.Insert(*Run(a)).ok());
  ASSERT_TRUE(cache.Insert(*Run(a), /*pinned=*/true).ok());
  EXPECT_EQ(cache.stats().entries, 1);
  EXPECT_EQ(cache.stats().pinned_entries, 1);
  // A prefix of an entry becomes its own entry; evicting the longer one keeps the shorter.
  std::vector<int32_t> longer = a;
  for (int32_t t : Tokens(6, 8)) longer.push_back(t);
  ASSERT_TRUE(cache.Insert(*Run(longer)).ok());
  EXPECT_EQ(cache.stats().entries, 2);
  cache.Clear();
  EXPECT_EQ(cache.MatchLength(longer, 100), 10);
}

}  // namespace
}  // namespace fak
