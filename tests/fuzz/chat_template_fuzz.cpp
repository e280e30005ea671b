// libFuzzer target: any byte string given as a chat template either fails to parse or to render
// with a message, or renders a fixed conversation within the interpreter's limits. Never a crash, a
// hang (loops and recursion are bounded) or a sanitizer report.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json kMessages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi <b>there</b> \u00e9"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
      "function": {"name": "get", "arguments": {"x": 1, "y": [true, null]}}}]},
    {"role": "tool", "content": "42"}])");
  static const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get", "description": "d",
      "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}])");
  auto tmpl = fak::ChatTemplate::Parse(std::string(reinterpret_cast<const char*>(data), size));
  if (!tmpl.ok()) {
    if (tmpl.status().message().empty()) std::abort();
    return 0;
  }
  auto out = fak::RenderChat(*tmpl, kMessages, kTools, true, "<s>", "</s>");
  if (!out.ok() && out.status().message().empty()) std::abort();
  return 0;
}
