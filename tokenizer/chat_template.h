// Chat templates: the Jinja programs shipped in tokenizer_config.json / GGUF metadata that turn a list
// of messages into the prompt text. Rendering matches HF transformers' apply_chat_template(
// tokenize=False) byte for byte: jinja2 with trim_blocks and lstrip_blocks, transformers' tojson
// (json.dumps with ensure_ascii=False), raise_exception and strftime_now.
//
//   FAK_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::Parse(source));
//   FAK_ASSIGN_OR_RETURN(std::string prompt, RenderChat(t, messages, nullptr, true, "", "<|im_end|>"));
//
// Errors (syntax and render) read "template:LINE:COL: message"; nothing throws.
// Pass ordered_json where key order matters: tojson prints dicts in their insertion order, as Python
// does, and nlohmann::json sorts keys.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/interpreter.h"

namespace fak {

class ChatTemplate {
 public:
  static Result<ChatTemplate> Parse(std::string source, jinja::RenderOptions options = {});

  // `context` is an object of template variables.
  Result<std::string> Render(const nlohmann::ordered_json& context) const;
  Result<std::string> Render(const nlohmann::json& context) const;
  Result<std::string> RenderValue(const jinja::Value& context) const;

  const std::string& source() const { return source_; }
  jinja::RenderOptions& options() { return options_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Template> tree_;  // immutable once parsed; copies share it
  jinja::RenderOptions options_;
};

// What apply_chat_template passes: messages, tools (None when null), documents (None),
// add_generation_prompt, bos_token, eos_token, then `extra_kwargs` (an object; may override any of
// these, e.g. {"enable_thinking": false}).
Result<std::string> RenderChat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools, bool add_generation_prompt,
                               const std::string& bos_token, const std::string& eos_token,
                               const nlohmann::ordered_json& extra_kwargs = nlohmann::ordered_json::object());
Result<std::string> RenderChat(const ChatTemplate& tmpl, const nlohmann::json& messages,
                               const nlohmann::json& tools, bool add_generation_prompt,
                               const std::string& bos_token, const std::string& eos_token,
                               const nlohmann::json& extra_kwargs = nlohmann::json::object());

}  // namespace fak
