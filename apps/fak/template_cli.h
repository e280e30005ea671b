// `fak template -m MODEL -f messages.json`: renders a model's chat template over a conversation and
// prints the prompt text exactly (no trailing newline added), as apply_chat_template(tokenize=False)
// would produce it.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "core/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/chat_template_loader.h"

namespace fak {

struct TemplateOptions {
  // A GGUF file (template in `tokenizer.chat_template`) or a directory holding tokenizer_config.json
  // (its `chat_template`) or chat_template.jinja.
  std::string model_path;
  // A JSON array of messages, or an object with `messages` and optional `tools`,
  // `add_generation_prompt` and any other template variables (enable_thinking, ...).
  std::string messages_path;
  std::optional<bool> add_generation_prompt;  // overrides the file's value; default false
  std::string template_name;                  // for configs with several named templates; "default"
};

Status RunTemplate(const TemplateOptions& options, std::ostream& out);

}  // namespace fak
