// The OpenAI API's request and response shapes: parsing a /v1/chat/completions or /v1/completions
// body into a generation request (every field checked by name and type, unknown fields refused), and
// writing the responses and stream chunks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/scheduler.h"
#include "grammar/vocab.h"
#include "server/tool_calls.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/chat_template_loader.h"
#include "tokenizer/tokenizer.h"

namespace fak::server {

// What a request needs from the loaded model.
struct ModelInfo {
  std::string id;  // the name clients pass as "model"
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;  // null: the model has none (chat is refused)
  ModelChatTemplate template_meta;
  int64_t context = 0;
  grammar::GrammarCache* grammars = nullptr;  // null: constrained output is refused
  ToolFormat tool_format = ToolFormat::kHermes;
};

enum class Endpoint { kChat, kCompletions };

struct ApiRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  GenerationRequest gen;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int top_logprobs = 0;
  bool return_token_ids = false;  // extension: each choice also lists its tokens' ids ("token_ids")
  std::string prompt_text;        // the rendered prompt (chat) or the prompt as given
  // Tool calls: parsed out of the reply when tools are offered and tool_choice is not "none".
  bool parse_tool_calls = false;
  std::vector<std::string> tool_names;
};

// An error an API client sees: HTTP status, OpenAI error type, the field it concerns, and a message.
struct ApiError {
  int http_status = 400;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
  std::string message;
};

// Parses and checks the body, renders chat messages through the model's template and tokenizes the
// prompt. On failure `err` says why and the result is false.
bool ParseRequest(Endpoint endpoint, const nlohmann::ordered_json& body, const ModelInfo& model,
                  ApiRequest* out, ApiError* err);

nlohmann::json ErrorBody(const ApiError& e);

// Log-probabilities of the tokens in `tokens`, in the endpoint's shape (chat: {"content": [...]};
// completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}).
nlohmann::json LogprobsJson(Endpoint endpoint, const std::vector<TokenOut>& tokens, const Tokenizer& tok,
                            int64_t text_offset);

nlohmann::json UsageJson(const RequestUsage& u);

// JSON text with invalid UTF-8 replaced (token pieces may be partial characters).
std::string Dump(const nlohmann::json& j);

}  // namespace fak::server
