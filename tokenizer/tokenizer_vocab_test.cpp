// The llama.cpp tokenizer vectors: every string of ../shared/fixtures/vocab/*.inp must encode to the
// ids on the matching line of the .out file (no BOS/EOS, special tokens not parsed).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/mapped_file.h"  // ReadFileToString
#include "tokenizer/loader.h"  // LoadTokenizer

namespace fak {
namespace {

constexpr char kVocabDir[] = "../shared/fixtures/vocab/";

struct Vectors {
  std::vector<std::string> inputs;
  std::vector<std::vector<int32_t>> ids;
};

// Strings are separated by "\n__ggml_vocab_test__\n"; the file ends with one separator.
Vectors ReadVectors(const std::string& base) {
  Vectors v;
  const Result<std::string> inp = ReadFileToString(base + ".inp");
  const Result<std::string> out = ReadFileToString(base + ".out");
  EXPECT_TRUE(inp.ok()) << inp.status().ToString();
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!inp.ok() || !out.ok()) return v;
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  while (true) {
    const size_t next = inp->find(sep, pos);
    if (next == std::string::npos) break;
    v.inputs.push_back(inp->substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream lines(*out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream nums(line);
    std::vector<int32_t> ids;
    int32_t id;
    while (nums >> id) ids.push_back(id);
    v.ids.push_back(std::move(ids));
  }
  return v;
}

std::string Join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

void CheckVectors(const std::string& model_path, const std::string& vectors_base, bool byte_level) {
  Result<Tokenizer> tok = LoadTokenizer(model_path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const Vectors v = ReadVectors(vectors_base);
  ASSERT_EQ(v.inputs.size(), 46u);
  ASSERT_EQ(v.inputs.size(), v.ids.size());
  EncodeOptions opts;
  opts.add_special = false;
  opts.parse_special = false;
  int failures = 0;
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    Result<std::vector<int32_t>> ids = tok->Encode(v.inputs[i], opts);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    if (*ids != v.ids[i]) ++failures;
    EXPECT_EQ(Join(*ids), Join(v.ids[i])) << "input " << i << ": '" << v.inputs[i] << "'";
    if (byte_level) {
      Result<std::string> text = tok->Decode(*ids);
      ASSERT_TRUE(text.ok());
      EXPECT_EQ(*text, v.inputs[i]) << "round trip of input " << i;
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(TokenizerVocab, Gpt2) {
  CheckVectors(std::string(kVocabDir) + "ggml-vocab-gpt-2.gguf",
               std::string(kVocabDir) + "ggml-vocab-gpt-2.gguf", true);
}
TEST(TokenizerVocab, Falcon) {
  CheckVectors(std::string(kVocabDir) + "ggml-vocab-falcon.gguf",
               std::string(kVocabDir) + "ggml-vocab-falcon.gguf", true);
}
TEST(TokenizerVocab, LlamaSpm) {
  CheckVectors(std::string(kVocabDir) + "ggml-vocab-llama-spm.gguf",
               std::string(kVocabDir) + "ggml-vocab-llama-spm.gguf", false);
}
TEST(TokenizerVocab, Phi3) {
  CheckVectors(std::string(kVocabDir) + "ggml-vocab-phi-3.gguf",
               std::string(kVocabDir) + "ggml-vocab-phi-3.gguf", false);
}
TEST(TokenizerVocab, Qwen2FromQwen3TokenizerJson) {
  CheckVectors("../shared/fixtures/tokenizers/qwen3/tokenizer.json",
               std::string(kVocabDir) + "ggml-vocab-qwen2.gguf", true);
}

}  // namespace
}  // namespace fak
