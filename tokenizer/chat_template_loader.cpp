#include "tokenizer/chat_template_loader.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"  // ReadFileToString
#include "formats/gguf.h"      // GgufFile

namespace fak {

namespace {

using ojson = nlohmann::ordered_json;

// tokenizer_config.json stores special tokens as strings or as {"content": "..."} objects.
std::string TokenText(const ojson& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string())
    return j["content"].get<std::string>();
  return "";
}

Result<std::string> PickTemplate(const ojson& field, const std::string& path, const std::string& name) {
  if (field.is_string()) {
    if (!name.empty() && name != "default") {
      return NotFound("{}: the model has one unnamed chat template, none named '{}'", path, name);
    }
    return field.get<std::string>();
  }
  if (field.is_array()) {
    std::string want = name.empty() ? "default" : name;
    for (const auto& t : field) {
      if (t.is_object() && t.value("name", "") == want && t.contains("template") &&
          t["template"].is_string()) {
        return t["template"].get<std::string>();
      }
    }
    std::string names;
    for (const auto& t : field) {
      if (t.is_object() && t.contains("name") && t["name"].is_string()) {
        names += (names.empty() ? "" : ", ") + t["name"].get<std::string>();
      }
    }
    return NotFound("{}: no chat template named '{}' (it has: {})", path, want, names);
  }
  return Corrupt("{}: chat_template must be a string or a list of named templates", path);
}

Result<ModelChatTemplate> FromDirectory(const std::string& dir, const std::string& name) {
  namespace fs = std::filesystem;
  ModelChatTemplate m;
  std::string config_path = (fs::path(dir) / "tokenizer_config.json").string();
  std::string jinja_path = (fs::path(dir) / "chat_template.jinja").string();
  std::error_code ec;
  bool have_config = fs::exists(config_path, ec);
  if (have_config) {
    FAK_ASSIGN_OR_RETURN(ojson config, ReadJsonFile(config_path));
    if (!config.is_object()) return Corrupt("{}: expected a JSON object", config_path);
    if (config.contains("bos_token")) m.bos_token = TokenText(config["bos_token"]);
    if (config.contains("eos_token")) m.eos_token = TokenText(config["eos_token"]);
    if (config.contains("chat_template")) {
      FAK_ASSIGN_OR_RETURN(m.source, PickTemplate(config["chat_template"], config_path, name));
    }
  }
  // Newer checkpoints keep the (default) template in its own file, which then takes precedence.
  if ((name.empty() || name == "default") && fs::exists(jinja_path, ec)) {
    FAK_ASSIGN_OR_RETURN(m.source, ReadFileToString(jinja_path));
  }
  if (m.source.empty()) {
    return NotFound(
        "{}: no chat template (neither tokenizer_config.json's chat_template nor chat_template.jinja)", dir);
  }
  return m;
}

// GGUF keeps the default template in tokenizer.chat_template and named ones in
// tokenizer.chat_template.NAME.
Result<ModelChatTemplate> FromGguf(const std::string& path, const std::string& name) {
  FAK_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open(path));
  ModelChatTemplate m;
  constexpr std::string_view kKey = "tokenizer.chat_template";
  if (name.empty() || name == "default") {
    FAK_ASSIGN_OR_RETURN(m.source, f.GetString(kKey));
  } else {
    const std::string key = std::string(kKey) + "." + name;
    if (f.Find(key) == nullptr) {
      std::string names;
      for (const auto& [k, v] : f.metadata()) {
        if (k.size() > kKey.size() + 1 && k.starts_with(kKey) && k[kKey.size()] == '.') {
          names += (names.empty() ? "" : ", ") + k.substr(kKey.size() + 1);
        }
      }
      if (names.empty()) names = f.Find(kKey) != nullptr ? "only the default" : "none";
      return NotFound("{}: no chat template named '{}' (it has: {})", path, name, names);
    }
    FAK_ASSIGN_OR_RETURN(m.source, f.GetString(key));
  }
  Result<const GgufArray*> tokens = f.GetArray("tokenizer.ggml.tokens");
  auto token = [&](const char* key) -> std::string {
    if (!tokens.ok()) return "";
    Result<uint64_t> id = f.GetUint(key);
    if (!id.ok() || *id >= (*tokens)->values.size()) return "";
    const std::string* s = (*tokens)->values[*id].AsString();
    return s ? *s : "";
  };
  m.bos_token = token("tokenizer.ggml.bos_token_id");
  m.eos_token = token("tokenizer.ggml.eos_token_id");
  return m;
}

}  // namespace

Result<nlohmann::ordered_json> ReadJsonFile(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Corrupt("{}: not valid JSON", path);
  return j;
}

Result<ModelChatTemplate> LoadModelChatTemplate(const std::string& model_path,
                                                const std::string& template_name) {
  std::error_code ec;
  if (std::filesystem::is_directory(model_path, ec)) return FromDirectory(model_path, template_name);
  if (!std::filesystem::exists(model_path, ec)) return NotFound("{}: no such file or directory", model_path);
  if (std::filesystem::path(model_path).filename() == "tokenizer_config.json") {
    return FromDirectory(std::filesystem::path(model_path).parent_path().string(), template_name);
  }
  return FromGguf(model_path, template_name);
}

}  // namespace fak
