#include "bench/prompt_set.h"

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "core/mapped_file.h"  // ReadFileToString
#include "core/sha256.h"       // Sha256Hex

namespace fak::bench {

std::string FindPromptSet(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(path, ec) || fs::path(path).is_absolute()) return path;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return path;
  const fs::path name = fs::path(path).filename();
  for (const fs::path& dir :
       {exe.parent_path() / "prompts", exe.parent_path().parent_path() / "share/fak/prompts"}) {
    if (fs::exists(dir / name, ec)) return (dir / name).string();
  }
  return path;
}

Result<PromptSet> LoadPromptSet(const std::string& given) {
  const std::string path = FindPromptSet(given);
  auto read = ReadFileToString(path);
  if (!read.ok()) {
    return read.status().WithContext(fmt::format(
        "prompt set {} (looked in the working directory, beside the fak binary in prompts/ and in "
        "../share/fak/prompts/)",
        given));
  }
  std::string bytes = std::move(read).value();
  PromptSet set;
  set.file_name = std::filesystem::path(path).filename().string();
  set.sha256 = Sha256Hex({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  const std::string stem = std::filesystem::path(path).stem().string();
  const size_t dash = stem.rfind('-');
  set.version = dash == std::string::npos ? stem : stem.substr(dash + 1);
  std::istringstream in(bytes);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return Corrupt("{}: line {}: not a JSON object", path, line_no);
    if (!j.contains("text") || !j["text"].is_string() || j["text"].get<std::string>().empty()) {
      return Corrupt("{}: line {}: field \"text\" missing or empty", path, line_no);
    }
    PromptEntry e;
    e.text = j["text"].get<std::string>();
    e.id = j.value("id", fmt::format("line-{}", line_no));
    e.category = j.value("category", "");
    set.prompts.push_back(std::move(e));
  }
  if (set.prompts.empty()) return Corrupt("{}: no prompts", path);
  return set;
}

Result<std::vector<int32_t>> FitPrompt(const PromptSet& set, size_t index, int64_t ctx,
                                       const Tokenizer& tok) {
  if (ctx < 1) return InvalidArgument("ctx must be at least 1 token, got {}", ctx);
  if (set.prompts.empty()) return InvalidArgument("the prompt set is empty");
  const size_t n = set.prompts.size();
  FAK_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.Encode(set.prompts[index % n].text));
  // Each appended text adds at least one token, so n * ctx appends always reach ctx.
  for (size_t k = 1; static_cast<int64_t>(ids.size()) < ctx && k <= n * static_cast<size_t>(ctx); ++k) {
    const std::string more = "\n\n" + set.prompts[(index + k) % n].text;
    FAK_ASSIGN_OR_RETURN(std::vector<int32_t> extra, tok.Encode(more, {.add_special = false}));
    ids.insert(ids.end(), extra.begin(), extra.end());
  }
  if (static_cast<int64_t>(ids.size()) < ctx) {
    return Internal("prompt {} could not be filled to {} tokens", index, ctx);
  }
  ids.resize(static_cast<size_t>(ctx));
  return ids;
}

}  // namespace fak::bench
