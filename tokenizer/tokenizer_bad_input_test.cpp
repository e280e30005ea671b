// Bad tokenizer files get errors that name the problem, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/mapped_file.h"              // ReadFileToString
#include "formats/gguf_writer.h"           // GgufWriter
#include "tokenizer/loader.h"              // LoadTokenizer
#include "tokenizer/spec_hf.h"             // TokenizerSpecFromHfJson
#include "tokenizer/spec_sentencepiece.h"  // TokenizerSpecFromSentencePiece

namespace fak {
namespace {

Status HfError(const std::string& json) {
  Result<TokenizerSpec> spec = TokenizerSpecFromHfJson(json, "", "t/tokenizer.json");
  if (!spec.ok()) return spec.status();
  Result<Tokenizer> tok = Tokenizer::Create(std::move(spec).value());
  return tok.ok() ? Status::Ok() : tok.status();
}

void ExpectError(const std::string& json, StatusCode code, const std::string& needle) {
  const Status s = HfError(json);
  ASSERT_FALSE(s.ok()) << json;
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("t/tokenizer.json"), std::string::npos) << s.ToString();
}

const char kMinimalModel[] =
    R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";

TEST(TokenizerBadInput, HfJsonMinimalIsAccepted) {
  EXPECT_TRUE(HfError(std::string("{") + kMinimalModel + "}").ok());
}

TEST(TokenizerBadInput, HfJsonErrorsNameTheField) {
  ExpectError("{\"model\": ", StatusCode::kCorrupt, "JSON syntax error at byte");
  // A number beyond a double's range is not a syntax error to the parser but must not escape as an
  // exception either (found by the tokenizer.json fuzzer).
  ExpectError(std::string("{\"special\": 1e999, ") + kMinimalModel + "}", StatusCode::kCorrupt,
              "unreadable JSON");
  ExpectError("[1, 2]", StatusCode::kCorrupt, "top level");
  ExpectError("{}", StatusCode::kNotFound, "missing field model");
  ExpectError(R"({"model": {"type": "BPE", "merges": []}})", StatusCode::kNotFound, "model.vocab");
  ExpectError(R"({"model": {"type": "BPE", "vocab": [], "merges": []}})", StatusCode::kCorrupt,
              "model.vocab is not an object");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}}})", StatusCode::kNotFound, "model.merges");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})", StatusCode::kCorrupt,
              "model.vocab['a']");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}})", StatusCode::kCorrupt,
              "model.merges[0]");
  ExpectError(R"({"model": {"type": "Unigram", "vocab": []}})", StatusCode::kUnsupported, "Unigram");
  ExpectError(R"({"model": {"type": "BPE", "vocab": {}, "merges": []}})", StatusCode::kCorrupt,
              "empty vocabulary");
  ExpectError(std::string("{") + kMinimalModel + R"(, "normalizer": {"type": "Precompiled"}})",
              StatusCode::kUnsupported, "Precompiled");
  ExpectError(
      std::string("{") + kMinimalModel +
          R"(, "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Nmt"}]}})",
      StatusCode::kUnsupported, "normalizer.normalizers[1] of type 'Nmt'");
  ExpectError(std::string("{") + kMinimalModel + R"(, "pre_tokenizer": {"type": "UnicodeScripts"}})",
              StatusCode::kUnsupported, "UnicodeScripts");
  ExpectError(
      std::string("{") + kMinimalModel +
          R"(, "pre_tokenizer": {"type": "Split", "pattern": {"String": "-"}, "behavior": "Sideways"}})",
      StatusCode::kCorrupt, "behavior 'Sideways'");
  ExpectError(std::string("{") + kMinimalModel +
                  R"(, "normalizer": {"type": "Replace", "pattern": {"Regex": "a(b"}, "content": ""}})",
              StatusCode::kInvalidArgument, "a(b");
  ExpectError(R"({"model": {"type": "WordPiece", "vocab": {}}})", StatusCode::kUnsupported, "WordPiece");
  ExpectError(std::string("{") + kMinimalModel + R"(, "normalizer": {"type": 5}})", StatusCode::kCorrupt,
              "unexpected value");
  ExpectError(std::string("{") + kMinimalModel + R"(, "added_tokens": [{"id": 3}]})", StatusCode::kCorrupt,
              "added_tokens[0].content");
  ExpectError(
      std::string("{") + kMinimalModel +
          R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(["}, "behavior": "Isolated"}})",
      StatusCode::kInvalidArgument, "regex");
}

TEST(TokenizerBadInput, EveryTruncationIsAnError) {
  const std::string full = std::string("{") + kMinimalModel +
                           R"(, "added_tokens": [{"id": 3, "content": "<x>", "special": true}],
      "normalizer": {"type": "NFC"}, "pre_tokenizer": {"type": "ByteLevel"}})";
  ASSERT_TRUE(HfError(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    EXPECT_FALSE(HfError(full.substr(0, n)).ok()) << n;
  }
}

TEST(TokenizerBadInput, MissingPaths) {
  Result<Tokenizer> t = LoadTokenizer("no/such/model.gguf");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  const std::string dir = testing::TempDir() + "/fak_tok_empty_dir_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  t = LoadTokenizer(dir);
  std::filesystem::remove(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("tokenizer.json"), std::string::npos);
}

TEST(TokenizerBadInput, SentencePieceModelErrors) {
  const Result<std::string> model = ReadFileToString("../shared/fixtures/tokenizers/llama2/tokenizer.model");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const auto bytes = [](std::string_view s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  ASSERT_TRUE(TokenizerSpecFromSentencePiece(bytes(*model), "tokenizer.model").ok());
  // Cut in the middle of a piece: the error names the offset.
  const Result<TokenizerSpec> cut =
      TokenizerSpecFromSentencePiece(bytes(std::string_view(*model).substr(0, 5001)), "cut.model");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("cut.model: offset"), std::string::npos) << cut.status().ToString();
  EXPECT_FALSE(TokenizerSpecFromSentencePiece(bytes("this is not protobuf"), "text.model").ok());
  EXPECT_FALSE(TokenizerSpecFromSentencePiece(bytes(""), "empty.model").ok());
}

// A tiny SentencePiece vocabulary written as GGUF.
GgufWriter TinySpmWriter() {
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b",
                                             "\xE2\x96\x81"
                                             "a",
                                             "ab",
                                             "\xE2\x96\x81"
                                             "ab",
                                             "<0x21>"});
  w.SetFloat32Array("tokenizer.ggml.scores", {0, 0, 0, -1, -2, -3, -4, -5, -6, 0});
  w.SetInt32Array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1, 1, 6});
  w.SetUint32("tokenizer.ggml.bos_token_id", 1);
  w.SetUint32("tokenizer.ggml.eos_token_id", 2);
  return w;
}

Result<Tokenizer> WriteAndLoad(GgufWriter& w, const std::string& name) {
  const std::string path = testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
  const Status s = w.Write(path);
  EXPECT_TRUE(s.ok()) << s.ToString();
  Result<Tokenizer> t = LoadTokenizer(path);
  std::filesystem::remove(path);
  return t;
}

TEST(TokenizerBadInput, TinySpmGgufWorks) {
  GgufWriter w = TinySpmWriter();
  Result<Tokenizer> t = WriteAndLoad(w, "fak_tok_tiny.gguf");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // "▁a" (-4) outscores "ab" (-5), so "ab" becomes ▁a + b, then ▁ab (-6) joins them.
  EXPECT_EQ(*t->Encode("ab"), (std::vector<int32_t>{1, 8}));
  // "!" has no piece: byte fallback to <0x21>; "?" has neither: unknown.
  EXPECT_EQ(*t->Encode("a!?", {false, false}), (std::vector<int32_t>{6, 9, 0}));
  // As HF and sentencepiece: only a space at the very start of the text is dropped.
  EXPECT_EQ(*t->Decode(std::vector<int32_t>{1, 8, 9}), "<s> ab!");
  EXPECT_EQ(*t->Decode(std::vector<int32_t>{8, 9}), "ab!");
}

// Words are encoded separately (and cached) only when no piece joins a character to a following
// U+2581; here "a▁" exists, so "a b" must merge across the space.
TEST(TokenizerBadInput, TinySpmPieceAcrossSpace) {
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b",
                                             "\xE2\x96\x81"
                                             "a",
                                             "a\xE2\x96\x81",
                                             "\xE2\x96\x81"
                                             "a\xE2\x96\x81",
                                             "\xE2\x96\x81"
                                             "b"});
  w.SetFloat32Array("tokenizer.ggml.scores", {0, 0, 0, -5, -5, -5, -1, -2, -0.5f, -3});
  w.SetInt32Array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1, 1, 1});
  Result<Tokenizer> t = WriteAndLoad(w, "fak_tok_across.gguf");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t->Encode("a b", {false, false}), (std::vector<int32_t>{8, 5}));
}

TEST(TokenizerBadInput, GgufErrorsNameTheKey) {
  {
    GgufWriter w;
    w.SetString("tokenizer.ggml.model", "llama");
    Result<Tokenizer> t = WriteAndLoad(w, "fak_tok_no_tokens.gguf");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("tokenizer.ggml.tokens"), std::string::npos) << t.status().ToString();
  }
  {
    GgufWriter w = TinySpmWriter();
    w.SetFloat32Array("tokenizer.ggml.scores", {0, 0});
    Result<Tokenizer> t = WriteAndLoad(w, "fak_tok_bad_scores.gguf");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("tokenizer.ggml.scores has 2 entries for 10 tokens"),
              std::string::npos)
        << t.status().ToString();
  }
  {
    GgufWriter w = TinySpmWriter();
    w.SetInt32Array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 1, 1, 1, 42});
    Result<Tokenizer> t = WriteAndLoad(w, "fak_tok_bad_type.gguf");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("token_type[9]"), std::string::npos) << t.status().ToString();
  }
  {
    GgufWriter w = TinySpmWriter();
    w.SetUint32("tokenizer.ggml.bos_token_id", 99);
    Result<Tokenizer> t = WriteAndLoad(w, "fak_tok_bad_bos.gguf");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("bos token id 99"), std::string::npos) << t.status().ToString();
  }
  {
    GgufWriter w = TinySpmWriter();
    w.SetString("tokenizer.ggml.model", "bert");
    Result<Tokenizer> t = WriteAndLoad(w, "fak_tok_bert.gguf");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(t.status().message().find("WordPiece"), std::string::npos) << t.status().ToString();
  }
  {
    GgufWriter w = TinySpmWriter();
    w.SetString("tokenizer.ggml.model", "gpt2");
    w.SetString("tokenizer.ggml.pre", "mystery");
    w.SetStringArray("tokenizer.ggml.merges", {"a b"});
    Result<Tokenizer> t = WriteAndLoad(w, "fak_tok_bad_pre.gguf");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("mystery"), std::string::npos) << t.status().ToString();
  }
}

}  // namespace
}  // namespace fak
