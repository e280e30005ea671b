// Differential cases from tools/tokenizer_oracle/gen_cases.py: random strings (mixed scripts, emoji,
// whitespace runs, digits, code, special-token look-alikes, invalid UTF-8) encoded by HuggingFace
// tokenizers (Qwen3) and by sentencepiece, cross-checked with tokenizers (Llama 2). fak must give the
// same ids and decode them to the same text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/loader.h"       // LoadTokenizer, LoadTokenizerSpec
#include "tokenizer/merge_table.h"  // SpmEncode: the direct SentencePiece algorithm
#include "tokenizer/unicode.h"      // SanitizeUtf8

namespace fak {
namespace {

struct Case {
  std::string input;     // bytes given to Encode (may be invalid UTF-8)
  std::string expected;  // what decoding should give
  std::vector<int32_t> ids;
  std::vector<int32_t> ids_nosplit;
  bool has_nosplit = false;
};

std::vector<Case> ReadCases(const std::string& path) {
  std::vector<Case> cases;
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  std::string line;
  while (std::getline(f, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    Case c;
    if (j.contains("hex")) {
      const std::string hex = j["hex"].get<std::string>();
      for (size_t i = 0; i + 1 < hex.size(); i += 2) {
        c.input.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
      }
    } else {
      c.input = j["text"].get<std::string>();
    }
    c.ids = j["ids"].get<std::vector<int32_t>>();
    if (j.contains("ids_nosplit")) {
      c.ids_nosplit = j["ids_nosplit"].get<std::vector<int32_t>>();
      c.has_nosplit = true;
    }
    // The references decode invalid input with bytes.decode("utf-8", "replace") first.
    c.expected = j.contains("decoded") ? j["decoded"].get<std::string>() : SanitizeUtf8(c.input);
    cases.push_back(std::move(c));
  }
  return cases;
}

// Returns the number of mismatching cases; prints the first few.
int RunCases(const Tokenizer& tok, const std::vector<Case>& cases, bool check_nosplit) {
  int failures = 0;
  EncodeOptions split;
  split.add_special = false;
  split.parse_special = true;
  EncodeOptions nosplit = split;
  nosplit.parse_special = false;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Result<std::vector<int32_t>> ids = tok.Encode(c.input, check_nosplit ? split : nosplit);
    const bool ids_ok = ids.ok() && *ids == c.ids;
    bool nosplit_ok = true;
    if (check_nosplit && c.has_nosplit) {
      const Result<std::vector<int32_t>> ids2 = tok.Encode(c.input, nosplit);
      nosplit_ok = ids2.ok() && *ids2 == c.ids_nosplit;
    }
    const Result<std::string> text = tok.Decode(c.ids);
    const bool text_ok = text.ok() && *text == c.expected;
    if (!(ids_ok && nosplit_ok && text_ok) && ++failures <= 5) {
      std::string got;
      if (ids.ok()) {
        for (int32_t id : *ids) got += std::to_string(id) + " ";
      }
      std::string want;
      for (int32_t id : c.ids) want += std::to_string(id) + " ";
      ADD_FAILURE() << "case " << i << " '" << c.input << "': ids " << (ids_ok ? "ok" : "differ")
                    << ", no-split ids " << (nosplit_ok ? "ok" : "differ") << ", decode "
                    << (text_ok ? "ok" : "differs: '" + (text.ok() ? *text : "?") + "'") << "\n got  " << got
                    << "\n want " << want;
    }
  }
  return failures;
}

TEST(TokenizerDiff, Qwen3MatchesHfTokenizers) {
  Result<Tokenizer> tok = LoadTokenizer("../shared/fixtures/tokenizers/qwen3/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::vector<Case> cases = ReadCases("tests/fixtures/tokenizer/qwen3_cases.jsonl");
  ASSERT_GE(cases.size(), 2000u);
  EXPECT_EQ(RunCases(*tok, cases, true), 0) << "of " << cases.size();
}

// Llama 2 from its own tokenizer.model, and from the llama-spm GGUF (the same 32,000 pieces).
TEST(TokenizerDiff, Llama2MatchesSentencePiece) {
  const std::vector<Case> cases = ReadCases("tests/fixtures/tokenizer/llama2_cases.jsonl");
  ASSERT_GE(cases.size(), 2000u);
  for (const char* path : {"../shared/fixtures/tokenizers/llama2/tokenizer.model",
                           "../shared/fixtures/vocab/ggml-vocab-llama-spm.gguf"}) {
    Result<Tokenizer> tok = LoadTokenizer(path);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    EXPECT_EQ(RunCases(*tok, cases, false), 0) << path << ": of " << cases.size();
  }
}

// The tokenizer runs SentencePiece BPE through a precomputed pair table; SpmEncode is the algorithm
// written directly (score of the concatenation looked up per pair). Both must agree on every case.
TEST(TokenizerDiff, Llama2PairTableMatchesDirectSentencePieceBpe) {
  Result<TokenizerSpec> spec = LoadTokenizerSpec("../shared/fixtures/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  TokenIdMap mergeable;
  int32_t byte_ids[256];
  std::fill(std::begin(byte_ids), std::end(byte_ids), -1);
  for (size_t i = 0; i < spec->tokens.size(); ++i) {
    const std::string& t = spec->tokens[i];
    if (spec->types[i] == TokenType::kNormal) mergeable.emplace(t, static_cast<int32_t>(i));
    if (spec->types[i] == TokenType::kByte)
      byte_ids[std::stoi(t.substr(3, 2), nullptr, 16)] = static_cast<int32_t>(i);
  }
  const SpmVocabView view{&mergeable, &spec->scores, byte_ids, spec->unk_id};
  Result<Tokenizer> tok = Tokenizer::Create(*spec);
  ASSERT_TRUE(tok.ok());
  int failures = 0;
  for (const Case& c : ReadCases("tests/fixtures/tokenizer/llama2_cases.jsonl")) {
    std::string text = "\xE2\x96\x81";
    for (char ch : SanitizeUtf8(c.input))
      text += ch == ' ' ? std::string("\xE2\x96\x81") : std::string(1, ch);
    std::vector<int32_t> direct;
    if (!c.input.empty()) SpmEncode(view, text, &direct);
    if (direct != *tok->Encode(c.input, {false, false}) && ++failures <= 3) ADD_FAILURE() << c.input;
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace fak
