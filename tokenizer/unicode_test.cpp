#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

namespace fak {
namespace {

TEST(Unicode, ValidatesUtf8) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("\xC3\xA4pfel \xE6\x88\x91 \xF0\x9F\xA6\x99"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));          // cut short
  EXPECT_FALSE(IsValidUtf8("\x80"));
}

TEST(Unicode, SanitizeReplacesMaximalSubparts) {
  const std::string r = "\xEF\xBF\xBD";
  // Python: b"a\xe2\x82b".decode("utf-8", "replace") == "a\ufffdb" (one replacement for E2 82).
  EXPECT_EQ(SanitizeUtf8("a\xE2\x82"
                         "b"),
            "a" + r + "b");
  // Each byte that cannot start or continue a sequence is its own replacement.
  EXPECT_EQ(SanitizeUtf8("\x80\x80"), r + r);
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), r + r);
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), r + r + r);
  EXPECT_EQ(SanitizeUtf8("\xF0\x9F\xA6"), r);
  EXPECT_EQ(SanitizeUtf8("ok \xF0\x9F\xA6\x99"), "ok \xF0\x9F\xA6\x99");
  EXPECT_EQ(SanitizeUtf8(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(Unicode, IncompleteSuffix) {
  EXPECT_EQ(IncompleteUtf8SuffixLength("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("ab\xE6"), 1u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("ab\xE6\x88"), 2u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("ab\xE6\x88\x91"), 0u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("\xF0\x9F\xA6"), 3u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("\xE0\x80"), 0u);  // can never become valid
  EXPECT_EQ(IncompleteUtf8SuffixLength("\x80"), 0u);
}

TEST(Unicode, ByteLevelTableIsABijection) {
  const ByteLevelTable& t = GetByteLevelTable();
  EXPECT_EQ(t.byte_to_utf8[' '], "\xC4\xA0");   // Ġ
  EXPECT_EQ(t.byte_to_utf8['\n'], "\xC4\x8A");  // Ċ
  EXPECT_EQ(t.byte_to_utf8['A'], "A");
  for (int b = 0; b < 256; ++b) {
    size_t pos = 0;
    const uint32_t cp = DecodeUtf8(t.byte_to_utf8[b], &pos);
    ASSERT_LT(cp, t.cp_to_byte.size());
    EXPECT_EQ(t.cp_to_byte[cp], b);
  }
}

TEST(Unicode, Normalizes) {
  // "e" + combining acute -> "é" under NFC; the ligature "ﬁ" -> "fi" only under NFKC.
  EXPECT_EQ(*Normalize("e\xCC\x81", NormalizationForm::kNfc), "\xC3\xA9");
  EXPECT_EQ(*Normalize("\xEF\xAC\x81", NormalizationForm::kNfc), "\xEF\xAC\x81");
  EXPECT_EQ(*Normalize("\xEF\xAC\x81", NormalizationForm::kNfkc), "fi");
  EXPECT_EQ(*Normalize("\xC3\xA9", NormalizationForm::kNfd), "e\xCC\x81");
  EXPECT_EQ(*Normalize("plain", NormalizationForm::kNfc), "plain");
}

}  // namespace
}  // namespace fak
