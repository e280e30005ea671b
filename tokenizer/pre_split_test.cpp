#include "tokenizer/pre_split.h"

#include <gtest/gtest.h>

namespace fak {
namespace {

std::vector<std::string> SplitWith(const std::vector<SplitRule>& patterns, std::string_view text) {
  Result<PreSplitter> s = PreSplitter::Create(patterns);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  std::vector<std::string_view> pieces;
  s->Split(text, &pieces);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

using V = std::vector<std::string>;

TEST(PreSplit, Gpt2Pattern) {
  EXPECT_EQ(SplitWith({kGpt2SplitPattern}, "Hello world's   end!!\n"),
            (V{"Hello", " world", "'s", "  ", " end", "!!", "\n"}));
  EXPECT_EQ(SplitWith({kGpt2SplitPattern}, "\tx"), (V{"\t", "x"}));
}

TEST(PreSplit, Qwen2SplitsDigitsAndUnicodeLetters) {
  const auto patterns = PreSplitPatternsForGgufPre("qwen2");
  ASSERT_TRUE(patterns.ok());
  EXPECT_EQ(SplitWith(*patterns, "x 1234 \xC3\x84pfel"), (V{"x", " ", "1", "2", "3", "4", " \xC3\x84pfel"}));
  EXPECT_EQ(SplitWith(*patterns, "I'M ok"), (V{"I", "'M", " ok"}));
}

TEST(PreSplit, Llama3GroupsDigitsByThree) {
  const auto patterns = PreSplitPatternsForGgufPre("llama-bpe");
  ASSERT_TRUE(patterns.ok());
  EXPECT_EQ(SplitWith(*patterns, "x 1234567 I'LL\r\n\n  go"),
            (V{"x", " ", "123", "456", "7", " I", "'LL", "\r\n\n", " ", " go"}));
}

TEST(PreSplit, SequenceSplitsEachPiece) {
  // Falcon: punctuation runs first, then the ByteLevel regex, then runs of three digits.
  const auto patterns = PreSplitPatternsForGgufPre("falcon");
  ASSERT_TRUE(patterns.ok());
  EXPECT_EQ(patterns->size(), 3u);
  EXPECT_EQ(SplitWith(*patterns, "a+b 12345"), (V{"a", "+", "b", " ", "123", "45"}));
}

TEST(PreSplit, PiecesCoverTheText) {
  const std::string text = "  mixed \xE6\x88\x91\xE6\x83\xB3 text\r\n\r\n 42?! \xF0\x9F\x98\x81  ";
  const V pieces = SplitWith({kGpt2SplitPattern}, text);
  std::string joined;
  for (const auto& p : pieces) {
    EXPECT_FALSE(p.empty());
    joined += p;
  }
  EXPECT_EQ(joined, text);
}

TEST(PreSplit, EveryLlamaCppPreTokenizerCompiles) {
  const auto names = KnownGgufPreNames();
  EXPECT_GE(names.size(), 90u);
  for (std::string_view name : names) {
    const auto p = GgufPreTokenizerFor(name);
    ASSERT_TRUE(p.ok()) << name;
    const Result<PreSplitter> s = PreSplitter::Create(p->splits);
    EXPECT_TRUE(s.ok()) << name << ": " << s.status().ToString();
    // Pieces cover the text for every name (no rule removes matches).
    const std::string text = "Hello WORLD's 1234567 \xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96 ok!!\n\n  x";
    if (s.ok()) {
      std::vector<std::string_view> pieces;
      s->Split(text, &pieces);
      std::string joined;
      for (std::string_view piece : pieces) joined += piece;
      EXPECT_EQ(joined, text) << name;
    }
  }
  EXPECT_TRUE(GgufPreTokenizerFor("llama-bpe")->ignore_merges);
  EXPECT_FALSE(GgufPreTokenizerFor("gemma4")->byte_level);
}

TEST(PreSplit, DigitGroupingFromTheRight) {
  // superbpe: an empty-match lookahead still splits the text (as in HuggingFace).
  EXPECT_EQ(SplitWith(*PreSplitPatternsForGgufPre("superbpe"), "x1234567 89"),
            (V{"x", "1", "234", "567", " ", "89"}));
  EXPECT_EQ(SplitWith(*PreSplitPatternsForGgufPre("afmoe"), "1234567"), (V{"1", "234", "567"}));
  // Kimi K2: Han runs are their own pieces, other letters follow the GPT-4o rules.
  EXPECT_EQ(SplitWith(*PreSplitPatternsForGgufPre("kimi-k2"),
                      "ab\xE4\xBD\xA0\xE5\xA5\xBD"
                      "Cd"),
            (V{"ab", "\xE4\xBD\xA0\xE5\xA5\xBD", "Cd"}));
}

// Expected pieces from HuggingFace tokenizers' Split pre-tokenizer on "a--b-c-" with the pattern "-".
TEST(PreSplit, SplitBehavioursAsHuggingFace) {
  auto rule = [](SplitBehavior b, bool invert = false) {
    return std::vector<SplitRule>{SplitRule("-", b, invert)};
  };
  EXPECT_EQ(SplitWith(rule(SplitBehavior::kRemoved), "a--b-c-"), (V{"a", "b", "c"}));
  EXPECT_EQ(SplitWith(rule(SplitBehavior::kIsolated), "a--b-c-"), (V{"a", "-", "-", "b", "-", "c", "-"}));
  EXPECT_EQ(SplitWith(rule(SplitBehavior::kMergedWithPrevious), "a--b-c-"), (V{"a-", "-", "b-", "c-"}));
  EXPECT_EQ(SplitWith(rule(SplitBehavior::kMergedWithNext), "a--b-c-"), (V{"a", "-", "-b", "-c", "-"}));
  EXPECT_EQ(SplitWith(rule(SplitBehavior::kContiguous), "a--b-c-"), (V{"a", "--", "b", "-", "c", "-"}));
  EXPECT_EQ(SplitWith(rule(SplitBehavior::kRemoved, true), "a--b-c-"), (V{"-", "-", "-", "-"}));
  EXPECT_EQ(SplitWith(rule(SplitBehavior::kMergedWithPrevious, true), "a--b-c-"),
            (V{"a", "-", "-b", "-c", "-"}));
  // After a ByteLevel step a rule sees mapped text: byte 0xB2 of "\xC2\xB2" is the digit-like U+00B2.
  EXPECT_EQ(SplitWith({SplitRule(R"(\p{N}+)", SplitBehavior::kIsolated, false, true)},
                      "x\xC2\xB2"
                      "3"),
            (V{"x\xC2",
               "\xB2"
               "3"}));
}

TEST(PreSplit, BadPatternNamesTheProblem) {
  Result<PreSplitter> s = PreSplitter::Create({"(unclosed"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("(unclosed"), std::string::npos) << s.status().ToString();
  EXPECT_FALSE(PreSplitPatternsForGgufPre("no-such-pre").ok());
}

}  // namespace
}  // namespace fak
