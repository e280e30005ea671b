#include "tokenizer/pre_split.h"

#include <gtest/gtest.h>

namespace fak {
namespace {

std::vector<std::string> SplitWith(const std::vector<std::string>& patterns, std::string_view text) {
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

TEST(PreSplit, BadPatternNamesTheProblem) {
  Result<PreSplitter> s = PreSplitter::Create({"(unclosed"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("(unclosed"), std::string::npos) << s.status().ToString();
  EXPECT_FALSE(PreSplitPatternsForGgufPre("no-such-pre").ok());
}

}  // namespace
}  // namespace fak
