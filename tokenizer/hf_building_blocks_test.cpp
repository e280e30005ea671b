// tokenizer.json building blocks against HuggingFace tokenizers: each configuration of
// tests/fixtures/tokenizer/building_blocks/cases.json (tools/tokenizer_oracle/building_blocks.py) pairs a
// small trained vocabulary with a normalizer and pre-tokenizer; fak must give the ids `tokenizers` gave
// on llama.cpp's vocabulary texts (read from ../shared/fixtures/vocab) and on the extra texts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "core/mapped_file.h"   // ReadFileToString
#include "tokenizer/spec_hf.h"  // TokenizerSpecFromHfJson
#include "tokenizer/tokenizer.h"

namespace fak {
namespace {

using nlohmann::json;

constexpr char kDir[] = "tests/fixtures/tokenizer/building_blocks/";
constexpr char kVectorsDir[] = "../shared/fixtures/vocab/";

json ReadJson(const std::string& path) {
  const Result<std::string> text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? json::parse(*text) : json();
}

std::vector<std::string> VectorTexts(const std::string& path) {
  std::vector<std::string> texts;
  const Result<std::string> raw = ReadFileToString(path);
  if (!raw.ok()) return texts;
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  while (pos < raw->size()) {
    const size_t next = raw->find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(raw->substr(pos));
      break;
    }
    texts.push_back(raw->substr(pos, next - pos));
    pos = next + sep.size();
  }
  return texts;
}

std::string JoinIds(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Returns the number of texts whose ids differ; reports the first few.
int Check(const Tokenizer& tok, const std::string& config, const std::vector<std::string>& texts,
          const json& expected, bool round_trip) {
  EncodeOptions opts;
  opts.add_special = false;
  int failures = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int32_t> want = expected[i].get<std::vector<int32_t>>();
    Result<std::vector<int32_t>> ids = tok.Encode(texts[i], opts);
    if (!ids.ok()) {
      ADD_FAILURE() << config << ": " << ids.status().ToString();
      ++failures;
      continue;
    }
    if (*ids != want) {
      if (++failures <= 3) {
        ADD_FAILURE() << config << ": text " << i << " '" << texts[i] << "'\n  fak:  " << JoinIds(*ids)
                      << "\n  want: " << JoinIds(want);
      }
      continue;
    }
    if (round_trip) {
      Result<std::string> text = tok.Decode(*ids);
      EXPECT_TRUE(text.ok() && *text == texts[i]) << config << ": round trip of text " << i;
    }
  }
  return failures;
}

TEST(HfBuildingBlocks, MatchHuggingFaceTokenizers) {
  const json cases = ReadJson(std::string(kDir) + "cases.json");
  ASSERT_TRUE(cases.is_object());
  const std::vector<std::string> extra = cases["extra_texts"].get<std::vector<std::string>>();
  const std::string vectors_path = std::string(kVectorsDir) + cases["vector_texts_file"].get<std::string>();
  const std::vector<std::string> vectors = VectorTexts(vectors_path);
  const bool have_vectors = vectors.size() == cases["vector_count"].get<size_t>();
  if (!have_vectors) std::printf("  note: %s missing; checking the extra texts only\n", vectors_path.c_str());
  ASSERT_GE(cases["configs"].size(), 15u);
  for (const json& c : cases["configs"]) {
    const std::string name = c["name"].get<std::string>();
    const json vocab = ReadJson(std::string(kDir) + c["vocab"].get<std::string>());
    json model = vocab["options"];
    model["vocab"] = vocab["vocab"];
    model["merges"] = vocab["merges"];
    for (const auto& [k, v] : c["model_options"].items()) model[k] = v;
    const json root = {{"model", model},
                       {"normalizer", c["normalizer"]},
                       {"pre_tokenizer", c["pre_tokenizer"]},
                       {"decoder", c["decoder"]}};
    Result<TokenizerSpec> spec = TokenizerSpecFromHfJson(root.dump(), "", name);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    Result<Tokenizer> tok = Tokenizer::Create(std::move(spec).value());
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    const bool round_trip = c["round_trip"].get<bool>();
    int failures = Check(*tok, name, extra, c["ids_extra"], round_trip);
    if (have_vectors) failures += Check(*tok, name, vectors, c["ids_vectors"], round_trip);
    EXPECT_EQ(failures, 0) << name;
  }
}

}  // namespace
}  // namespace fak
