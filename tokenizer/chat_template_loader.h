// The chat template a model ships: from a GGUF file (`tokenizer.chat_template`) or a checkpoint
// folder (tokenizer_config.json's `chat_template`, or chat_template.jinja), with its BOS/EOS text.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace fak {

struct ModelChatTemplate {
  std::string source;
  std::string bos_token;
  std::string eos_token;
};
// A JSON file, keys in file order (templates print dicts in insertion order); Corrupt when invalid.
Result<nlohmann::ordered_json> ReadJsonFile(const std::string& path);

// template_name picks one of several named templates ("default" when empty).
Result<ModelChatTemplate> LoadModelChatTemplate(const std::string& model_path,
                                                const std::string& template_name = "");

}  // namespace fak
