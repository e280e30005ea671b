#include "apps/fak/tokenize_cli.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fak {
namespace {

TEST(TokenizeCli, PrintsIdsAsJson) {
  TokenizeOptions o;
  o.model = "../shared/fixtures/vocab/ggml-vocab-llama-spm.gguf";
  o.text = "Hello world";
  o.ids_only = true;
  std::ostringstream out;
  ASSERT_TRUE(RunTokenize(o, out).ok());
  EXPECT_EQ(out.str(), "[1, 15043, 3186]\n");
  o.no_special = true;
  out.str("");
  ASSERT_TRUE(RunTokenize(o, out).ok());
  EXPECT_EQ(out.str(), "[15043, 3186]\n");
}

TEST(TokenizeCli, PrintsPiecesFromFile) {
  const std::string path = testing::TempDir() + "/fak_tokenize_input_" + std::to_string(getpid()) + ".txt";
  std::ofstream(path) << "<|im_start|>hi\n";
  TokenizeOptions o;
  o.model = "../shared/fixtures/tokenizers/qwen3/tokenizer.json";
  o.file = path;
  std::ostringstream out;
  const Status s = RunTokenize(o, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out.str(), "151644 '<|im_start|>'\n6023 'hi'\n198 '\\n'\n");
  std::filesystem::remove(path);
}

TEST(TokenizeCli, ErrorsNameTheProblem) {
  TokenizeOptions o;
  std::ostringstream out;
  EXPECT_EQ(RunTokenize(o, out).code(), StatusCode::kInvalidArgument);
  o.model = "missing.gguf";
  const Status s = RunTokenize(o, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing.gguf"), std::string::npos);
  o.model = "../shared/fixtures/vocab/ggml-vocab-llama-spm.gguf";
  o.file = "no/such/input.txt";
  EXPECT_FALSE(RunTokenize(o, out).ok());
  EXPECT_TRUE(out.str().empty());
}

TEST(TokenizeCli, EscapesPieces) {
  EXPECT_EQ(EscapePiece("a'b\\\n\t\x01"), "a\\'b\\\\\\n\\t\\x01");
  EXPECT_EQ(EscapePiece("\xE6\x88\x91"), "\xE6\x88\x91");
  EXPECT_EQ(EscapePiece("\xE6\x88"), "\\xe6\\x88");
}

}  // namespace
}  // namespace fak
