// The versioned prompt set (bench/prompts/prompts-v1.jsonl) and the rule that turns its texts into
// token sequences of exactly --ctx tokens, so every arm of a comparison sees identical token ids.
//
// Fitting rule (v1): prompt i is encoded with the tokenizer's own special-token rule (BOS when the
// tokenizer adds one). While it is shorter than ctx, the texts of prompts i+1, i+2, ... (wrapping
// around the set) are appended, each as "\n\n" + text encoded without special tokens. The result is
// cut to exactly ctx tokens. The warm-up sequence is built the same way from the prompt after the
// last measured one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace fak::bench {

struct PromptEntry {
  std::string id;
  std::string category;
  std::string text;
};

struct PromptSet {
  std::string version;  // "v1", from the file name prompts-<version>.jsonl
  std::string file_name;
  std::string sha256;  // of the file's bytes
  std::vector<PromptEntry> prompts;
};

// Reads a JSONL prompt file: one {"id", "category", "text"} object per line.
Result<PromptSet> LoadPromptSet(const std::string& path);

// The default set's path relative to the source tree.
inline constexpr const char* kDefaultPromptSet = "bench/prompts/prompts-v1.jsonl";

// Where a relative prompt-set path is found: as given (from the working directory), else by its file
// name beside the fak binary in prompts/ (the build copies the sets there) or in ../share/fak/prompts/
// (the install tree). Returns the path as given when none exists, for the caller's error.
std::string FindPromptSet(const std::string& path);

// Token ids of prompt `index` fitted to exactly ctx tokens by the rule above.
Result<std::vector<int32_t>> FitPrompt(const PromptSet& set, size_t index, int64_t ctx, const Tokenizer& tok);

}  // namespace fak::bench
