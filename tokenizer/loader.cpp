#include "tokenizer/loader.h"

#include <unistd.h>

#include <filesystem>

#include "core/mapped_file.h"              // ReadFileToString, OpenRegularFile
#include "formats/gguf.h"                  // GgufFile
#include "tokenizer/spec_gguf.h"           // TokenizerSpecFromGguf
#include "tokenizer/spec_hf.h"             // TokenizerSpecFromHfJson
#include "tokenizer/spec_sentencepiece.h"  // TokenizerSpecFromSentencePiece

namespace fak {
namespace {

bool HasGgufMagic(const std::string& path) {
  struct stat st {};
  auto fd = OpenRegularFile(path, &st);  // never waits on a FIFO
  if (!fd.ok()) return false;
  char magic[4] = {};
  const bool four = ::read(*fd, magic, 4) == 4;
  ::close(*fd);
  return four && std::string_view(magic, 4) == "GGUF";
}

}  // namespace

Result<TokenizerSpec> LoadTokenizerSpec(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFound("{}: no such file or directory", path);
  fs::path json_path = path;
  fs::path spm_path;
  if (fs::is_directory(path, ec)) {
    json_path = fs::path(path) / "tokenizer.json";
    if (!fs::exists(json_path, ec)) {
      spm_path = fs::path(path) / "tokenizer.model";
      if (!fs::exists(spm_path, ec))
        return NotFound("{}: directory has neither tokenizer.json nor tokenizer.model", path);
    }
  } else if (HasGgufMagic(path)) {
    FAK_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Open(path));
    return TokenizerSpecFromGguf(gguf);
  } else if (json_path.extension() == ".model") {
    spm_path = json_path;
  }
  if (!spm_path.empty()) {
    FAK_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(spm_path.string()));
    return TokenizerSpecFromSentencePiece(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
        spm_path.string());
  }
  FAK_ASSIGN_OR_RETURN(const std::string json, ReadFileToString(json_path.string()));
  std::string config;
  const fs::path config_path = json_path.parent_path() / "tokenizer_config.json";
  if (fs::exists(config_path, ec)) {
    FAK_ASSIGN_OR_RETURN(config, ReadFileToString(config_path.string()));
  }
  return TokenizerSpecFromHfJson(json, config, json_path.string());
}

Result<Tokenizer> LoadTokenizer(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(TokenizerSpec spec, LoadTokenizerSpec(path));
  return Tokenizer::Create(std::move(spec));
}

}  // namespace fak
