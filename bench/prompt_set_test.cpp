#include "bench/prompt_set.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tokenizer/loader.h"

namespace fak::bench {
namespace {

constexpr const char* kTinyModel = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";

TEST(PromptSet, DefaultSetIsVersionedAndDiverse) {
  auto set = LoadPromptSet(kDefaultPromptSet);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->version, "v1");
  EXPECT_EQ(set->file_name, "prompts-v1.jsonl");
  EXPECT_EQ(set->sha256.size(), 64u);
  ASSERT_EQ(set->prompts.size(), 100u);
  std::set<std::string> ids, texts, categories;
  for (const auto& p : set->prompts) {
    ids.insert(p.id);
    texts.insert(p.text);
    categories.insert(p.category);
  }
  EXPECT_EQ(ids.size(), 100u);
  EXPECT_EQ(texts.size(), 100u);
  EXPECT_GE(categories.size(), 10u);
}

TEST(PromptSet, FitGivesExactlyCtxTokensStartingWithThePrompt) {
  auto set = LoadPromptSet(kDefaultPromptSet);
  ASSERT_TRUE(set.ok());
  auto tok = LoadTokenizer(kTinyModel);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto own = tok->Encode(set->prompts[3].text);
  ASSERT_TRUE(own.ok());
  for (int64_t ctx : {1, 16, 128, 700}) {
    auto ids = FitPrompt(*set, 3, ctx, *tok);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    ASSERT_EQ(static_cast<int64_t>(ids->size()), ctx);
    const size_t common = std::min(ids->size(), own->size());
    EXPECT_TRUE(std::equal(own->begin(), own->begin() + static_cast<long>(common), ids->begin())) << ctx;
  }
  auto a = FitPrompt(*set, 99, 128, *tok), b = FitPrompt(*set, 99, 128, *tok),
       c = FitPrompt(*set, 98, 128, *tok);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);  // deterministic, and wraps around the set
  EXPECT_NE(*a, *c);
  EXPECT_FALSE(FitPrompt(*set, 0, 0, *tok).ok());
}

TEST(PromptSet, BadLinesAreNamed) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fak_prompt_set_test_" + std::to_string(getpid()) + "-v9.jsonl");
  std::ofstream(path) << "{\"id\":\"a\",\"text\":\"hello\"}\n{\"id\":\"b\"}\n";
  auto s = LoadPromptSet(path.string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("line 2"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("text"), std::string::npos);
  std::ofstream(path) << "not json\n";
  s = LoadPromptSet(path.string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("line 1"), std::string::npos);
  std::filesystem::remove(path);
  EXPECT_FALSE(LoadPromptSet("no/such/prompts-v1.jsonl").ok());
}

}  // namespace
}  // namespace fak::bench
