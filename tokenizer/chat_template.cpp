#include "tokenizer/chat_template.h"

#include <exception>

#include "tokenizer/jinja/parser.h"  // ParseTemplate

namespace fak {

Result<ChatTemplate> ChatTemplate::Parse(std::string source, jinja::RenderOptions options) {
  FAK_ASSIGN_OR_RETURN(jinja::Template tree, jinja::ParseTemplate(source));
  ChatTemplate t;
  t.source_ = std::move(source);
  t.tree_ = std::make_shared<const jinja::Template>(std::move(tree));
  t.options_ = options;
  return t;
}

Result<std::string> ChatTemplate::RenderValue(const jinja::Value& context) const {
  if (!tree_) return InvalidArgument("chat template was not parsed");
  try {
    jinja::Interpreter in(options_);
    return in.Render(*tree_, context);
  } catch (const std::exception& e) {  // std::bad_alloc and the like: report, never escape
    return Internal("template: render failed: {}", e.what());
  }
}

template <typename J>
static Result<std::string> RenderJson(const ChatTemplate& t, const J& context) {
  if (!context.is_object() && !context.is_null()) {
    return InvalidArgument("template context must be a JSON object, got {}", context.type_name());
  }
  try {
    return t.RenderValue(jinja::FromJson(context));
  } catch (const std::exception& e) {
    return InvalidArgument("template context: {}", e.what());
  }
}

Result<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context) const {
  return RenderJson(*this, context);
}
Result<std::string> ChatTemplate::Render(const nlohmann::json& context) const {
  return RenderJson(*this, context);
}

template <typename J>
static Result<std::string> RenderChatImpl(const ChatTemplate& tmpl, const J& messages, const J& tools,
                                          bool add_generation_prompt, const std::string& bos,
                                          const std::string& eos, const J& extra) {
  if (!messages.is_array())
    return InvalidArgument("messages must be a JSON array, got {}", messages.type_name());
  if (!tools.is_null() && !tools.is_array()) return InvalidArgument("tools must be a JSON array or null");
  if (!extra.is_null() && !extra.is_object())
    return InvalidArgument("extra template arguments must be a JSON object");
  try {
    jinja::Value ctx = jinja::Value::MakeDict();
    jinja::Dict& d = ctx.dict();
    d.Set("messages", jinja::FromJson(messages));
    d.Set("tools", jinja::FromJson(tools));
    d.Set("documents", jinja::Value::None());
    d.Set("add_generation_prompt", jinja::Value(add_generation_prompt));
    d.Set("bos_token", jinja::Value(bos));
    d.Set("eos_token", jinja::Value(eos));
    if (extra.is_object()) {
      for (auto it = extra.begin(); it != extra.end(); ++it) d.Set(it.key(), jinja::FromJson(it.value()));
    }
    return tmpl.RenderValue(ctx);
  } catch (const std::exception& e) {
    return InvalidArgument("chat template arguments: {}", e.what());
  }
}

Result<std::string> RenderChat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools, bool add_generation_prompt,
                               const std::string& bos_token, const std::string& eos_token,
                               const nlohmann::ordered_json& extra_kwargs) {
  return RenderChatImpl(tmpl, messages, tools, add_generation_prompt, bos_token, eos_token, extra_kwargs);
}

Result<std::string> RenderChat(const ChatTemplate& tmpl, const nlohmann::json& messages,
                               const nlohmann::json& tools, bool add_generation_prompt,
                               const std::string& bos_token, const std::string& eos_token,
                               const nlohmann::json& extra_kwargs) {
  return RenderChatImpl(tmpl, messages, tools, add_generation_prompt, bos_token, eos_token, extra_kwargs);
}

}  // namespace fak
