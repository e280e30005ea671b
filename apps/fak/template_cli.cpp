#include "apps/fak/template_cli.h"

#include <filesystem>

#include "tokenizer/chat_template_loader.h"  // LoadModelChatTemplate, ReadJsonFile

namespace fak {

namespace {

using ojson = nlohmann::ordered_json;

}  // namespace

Status RunTemplate(const TemplateOptions& options, std::ostream& out) {
  if (options.model_path.empty()) return InvalidArgument("template: a model (-m) is required");
  if (options.messages_path.empty()) return InvalidArgument("template: a messages file (-f) is required");
  FAK_ASSIGN_OR_RETURN(ModelChatTemplate model,
                       LoadModelChatTemplate(options.model_path, options.template_name));
  FAK_ASSIGN_OR_RETURN(ojson input, ReadJsonFile(options.messages_path));
  ojson messages, tools, extra = ojson::object();
  bool add_generation_prompt = false;
  if (input.is_array()) {
    messages = input;
  } else if (input.is_object()) {
    if (!input.contains("messages"))
      return InvalidArgument("{}: object has no 'messages' array", options.messages_path);
    for (auto it = input.begin(); it != input.end(); ++it) {
      if (it.key() == "messages") {
        messages = it.value();
      } else if (it.key() == "tools") {
        tools = it.value();
      } else if (it.key() == "add_generation_prompt") {
        if (!it.value().is_boolean()) {
          return InvalidArgument("{}: add_generation_prompt must be true or false", options.messages_path);
        }
        add_generation_prompt = it.value().get<bool>();
      } else {
        extra[it.key()] = it.value();
      }
    }
  } else {
    return InvalidArgument("{}: expected a JSON array of messages or an object with 'messages'",
                           options.messages_path);
  }
  if (!messages.is_array()) return InvalidArgument("{}: 'messages' must be an array", options.messages_path);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].is_object())
      return InvalidArgument("{}: messages[{}] is not an object", options.messages_path, i);
  }
  if (!tools.is_null() && !tools.is_array())
    return InvalidArgument("{}: 'tools' must be an array", options.messages_path);
  if (options.add_generation_prompt) add_generation_prompt = *options.add_generation_prompt;

  Result<ChatTemplate> tmpl = ChatTemplate::Parse(model.source);
  if (!tmpl.ok()) return tmpl.status().WithContext(options.model_path);
  Result<std::string> text =
      RenderChat(*tmpl, messages, tools, add_generation_prompt, model.bos_token, model.eos_token, extra);
  if (!text.ok()) return text.status().WithContext(options.model_path);
  out << *text;
  out.flush();
  if (!out) return IoError("template: writing the output failed");
  return Status::Ok();
}

}  // namespace fak
