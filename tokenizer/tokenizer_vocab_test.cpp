// The llama.cpp tokenizer vectors: every string of a ggml-vocab-*.gguf.inp file must encode to the ids on
// the matching line of the .out file (no BOS/EOS, special tokens not parsed). Committed: the families in
// ../shared/fixtures/vocab (and llama-bpe where present). Local: every family of a llama.cpp checkout's
// models/ folder, named by FAK_LLAMACPP_VOCAB_DIR (docs/tokenizer.md). HuggingFace building blocks on
// the same texts: hf_building_blocks_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

// Strings are separated by "\n__ggml_vocab_test__\n" (most files also end with one).
Result<Vectors> ReadVectors(const std::string& base) {
  Vectors v;
  FAK_ASSIGN_OR_RETURN(const std::string inp, ReadFileToString(base + ".inp"));
  FAK_ASSIGN_OR_RETURN(const std::string out, ReadFileToString(base + ".out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  while (pos < inp.size()) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      v.inputs.push_back(inp.substr(pos));
      break;
    }
    v.inputs.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream nums(line);
    std::vector<int32_t> ids;
    int32_t id;
    while (nums >> id) ids.push_back(id);
    v.ids.push_back(std::move(ids));
  }
  if (v.inputs.size() != v.ids.size()) {
    return Corrupt("{}: {} inputs but {} lines of ids", base, v.inputs.size(), v.ids.size());
  }
  return v;
}

std::string Join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

struct Outcome {
  size_t passed = 0;
  size_t total = 0;
  std::string first_failure;
};

// Encodes every vector; a byte-level vocabulary must also decode the ids back to the input.
Outcome RunVectors(const Tokenizer& tok, const Vectors& v, bool round_trip) {
  Outcome o;
  o.total = v.inputs.size();
  EncodeOptions opts;
  opts.add_special = false;
  opts.parse_special = false;
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    Result<std::vector<int32_t>> ids = tok.Encode(v.inputs[i], opts);
    std::string failure;
    if (!ids.ok()) {
      failure = ids.status().ToString();
    } else if (*ids != v.ids[i]) {
      failure = "got " + Join(*ids) + "want " + Join(v.ids[i]);
    } else if (round_trip) {
      Result<std::string> text = tok.Decode(*ids);
      if (!text.ok() || *text != v.inputs[i]) failure = "round trip differs";
    }
    if (failure.empty()) {
      ++o.passed;
    } else if (o.first_failure.empty()) {
      o.first_failure = "input " + std::to_string(i) + " '" + v.inputs[i] + "': " + failure;
    }
  }
  return o;
}

void CheckVectors(const std::string& model_path, const std::string& vectors_base, bool round_trip,
                  size_t expected_count = 46) {
  if (!std::filesystem::exists(model_path)) GTEST_SKIP() << "skipped: " << model_path << " is missing";
  Result<Tokenizer> tok = LoadTokenizer(model_path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const Result<Vectors> v = ReadVectors(vectors_base);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->inputs.size(), expected_count);
  const Outcome o = RunVectors(*tok, *v, round_trip);
  EXPECT_EQ(o.passed, o.total) << o.first_failure;
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
// Llama 3's byte-level BPE (llama-bpe: its own split regex, ignore_merges). The 8 MB vocabulary is not in
// the shared fixtures CI has; the test runs where they have it or FAK_LLAMACPP_VOCAB_DIR names a llama.cpp
// models/ folder.
TEST(TokenizerVocab, LlamaBpe) {
  std::string dir = kVocabDir;
  const char* env = std::getenv("FAK_LLAMACPP_VOCAB_DIR");
  if (!std::filesystem::exists(dir + "ggml-vocab-llama-bpe.gguf") && env != nullptr && *env != '\0') {
    dir = std::string(env) + "/";
  }
  const std::string path = dir + "ggml-vocab-llama-bpe.gguf";
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "skipped: ggml-vocab-llama-bpe.gguf is neither in " << kVocabDir
                 << " nor in $FAK_LLAMACPP_VOCAB_DIR";
  }
  CheckVectors(path, path, true);
}

// Every ggml-vocab-*.gguf with vectors in $FAK_LLAMACPP_VOCAB_DIR. Prints one line per family; fails
// for a family fak loads but does not match fully.
TEST(TokenizerVocab, LlamaCppModelsFolder) {
  const char* dir = std::getenv("FAK_LLAMACPP_VOCAB_DIR");
  if (dir == nullptr || *dir == '\0') GTEST_SKIP() << "skipped: FAK_LLAMACPP_VOCAB_DIR is not set";
  std::vector<std::string> models;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("ggml-vocab-") && name.ends_with(".gguf")) models.push_back(e.path().string());
  }
  std::sort(models.begin(), models.end());
  ASSERT_FALSE(models.empty()) << "no ggml-vocab-*.gguf in " << dir;
  size_t full = 0;
  size_t with_vectors = 0;
  for (const std::string& path : models) {
    const std::string family =
        std::filesystem::path(path).stem().string().substr(std::string("ggml-vocab-").size());
    Result<Tokenizer> tok = LoadTokenizer(path);
    if (!tok.ok()) {
      with_vectors += std::filesystem::exists(path + ".inp");
      std::printf("  %-16s not loaded: %s\n", family.c_str(), tok.status().ToString().c_str());
      if (tok.status().code() != StatusCode::kUnsupported) ADD_FAILURE() << tok.status().ToString();
      continue;
    }
    if (!std::filesystem::exists(path + ".inp")) {
      std::printf("  %-16s loads (no vectors)\n", family.c_str());
      continue;
    }
    ++with_vectors;
    const Result<Vectors> v = ReadVectors(path);
    if (!v.ok()) {
      ADD_FAILURE() << v.status().ToString();
      continue;
    }
    const Outcome o = RunVectors(*tok, *v, tok->spec().byte_level);
    std::printf("  %-16s %zu/%zu%s%s\n", family.c_str(), o.passed, o.total,
                o.first_failure.empty() ? "" : "  first: ", o.first_failure.c_str());
    if (o.passed == o.total) ++full;
    EXPECT_EQ(o.passed, o.total) << family << ": " << o.first_failure;
  }
  std::printf("  %zu of %zu families with vectors match fully\n", full, with_vectors);
}

}  // namespace
}  // namespace fak
