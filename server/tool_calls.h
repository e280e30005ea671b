// Tool calls: the syntax a model family writes them in, the grammar that forces a valid call, and the
// parser that turns generated text back into OpenAI `tool_calls` (whole or as a stream).
//
// Formats, chosen from the model's chat template:
//   hermes  (Qwen2.5, Qwen3, Hermes): <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>, repeated
//           for parallel calls, anywhere after some text;
//   llama3  (Llama 3.1-3.3 JSON tool calling): the whole reply is {"name": N, "parameters": {...}};
//   mistral (Mistral v3+): [TOOL_CALLS] [{"name": N, "arguments": {...}}, ...].
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace fak::server {

enum class ToolFormat { kHermes, kLlama3, kMistral };

ToolFormat DetectToolFormat(const std::string& chat_template_source);
const char* ToolFormatName(ToolFormat f);

struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON schema for the arguments (an object)
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as OpenAI sends it
};

// Grammar text for forced calls: one call to `tools[only]` (or to any of `tools` when only < 0), more
// than one when `parallel` (hermes and mistral). Arguments follow each tool's parameter schema.
Result<std::string> ForcedCallGrammar(ToolFormat f, const std::vector<ToolSpec>& tools, int only,
                                      bool parallel);

// The trigger and grammar for `tool_choice: auto`: output is free until the trigger appears, then the
// call must be well formed. Empty trigger: the format has none (llama3 calls are parsed, not forced).
struct LazyToolGrammar {
  std::string trigger;
  std::string grammar;
};
Result<LazyToolGrammar> AutoCallGrammar(ToolFormat f, const std::vector<ToolSpec>& tools, bool parallel);

// Splits streamed text into content for the client now and tool calls at the end.
class ToolCallParser {
 public:
  ToolCallParser(ToolFormat f, std::vector<std::string> known_tools);

  // Content that is final (text that might begin a tool call is held back).
  std::string Push(const std::string& text);
  // At the end: the held-back content and the calls. Text that looked like a call but does not parse
  // (malformed JSON, an unknown tool) is returned as content. `truncated`: the reply was cut by its
  // token limit, so a last hermes call left unfinished is dropped and the complete ones before it kept.
  std::string Finish(std::vector<ToolCall>* calls, bool truncated = false);

 private:
  bool ParseCalls(const std::string& body, bool truncated, std::vector<ToolCall>* calls) const;

  ToolFormat f_;
  std::vector<std::string> known_;
  std::string held_;       // content held back: might begin a call
  std::string call_text_;  // everything from the call marker on
  bool in_calls_ = false;
  bool started_ = false;  // some non-space content went out (llama3: calls only at the start)
};

}  // namespace fak::server
