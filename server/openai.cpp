#include "server/openai.h"

#include "server/openai_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

namespace fak::server {
namespace {

using Json = nlohmann::ordered_json;
using fields::Bad;
using fields::GetBool;
using fields::GetInt;
using fields::GetNumber;
using fields::TypeName;

// Message content: a string, null, or an array of {"type": "text", "text": ...} parts.
bool ContentText(const Json& c, size_t index, std::string* out, ApiError* err) {
  const std::string param = fmt::format("messages[{}].content", index);
  if (c.is_null()) return true;
  if (c.is_string()) {
    *out = c.get<std::string>();
    return true;
  }
  if (!c.is_array()) {
    *err = Bad(param,
               fmt::format("'{}' must be a string or an array of content parts, not {}", param, TypeName(c)));
    return false;
  }
  for (size_t k = 0; k < c.size(); ++k) {
    const Json& part = c[k];
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      *err = Bad(param, fmt::format("'{}[{}]' must be an object with a string 'type'", param, k));
      return false;
    }
    const std::string type = part["type"].get<std::string>();
    if (type != "text") {
      *err = Bad(param,
                 fmt::format("'{}[{}]' is a '{}' part; this model reads text parts only", param, k, type));
      return false;
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      *err = Bad(param, fmt::format("'{}[{}].text' must be a string", param, k));
      return false;
    }
    *out += part["text"].get<std::string>();
  }
  return true;
}

bool ParseMessages(const Json& body, Json* messages, size_t* leading_system, ApiError* err) {
  auto it = body.find("messages");
  if (it == body.end()) {
    *err = Bad("messages", "'messages' is required");
    return false;
  }
  if (!it->is_array() || it->empty()) {
    *err = Bad("messages", "'messages' must be a non-empty array");
    return false;
  }
  static const std::set<std::string> kRoles = {"system",    "developer", "user",
                                               "assistant", "tool",      "function"};
  *messages = Json::array();
  *leading_system = 0;
  bool still_leading = true;
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& m = (*it)[i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!m.is_object()) {
      *err = Bad(p, fmt::format("'{}' must be an object, not {}", p, TypeName(m)));
      return false;
    }
    if (!m.contains("role") || !m["role"].is_string()) {
      *err = Bad(p + ".role", fmt::format("'{}.role' is required and must be a string", p));
      return false;
    }
    const std::string role = m["role"].get<std::string>();
    if (!kRoles.count(role)) {
      *err =
          Bad(p + ".role",
              fmt::format("'{}.role' is '{}'; expected system, developer, user, assistant or tool", p, role));
      return false;
    }
    Json out = m;  // tool_calls, tool_call_id, name and the like pass through to the template
    if (role == "assistant" && m.contains("tool_calls") && m["tool_calls"].is_array()) {
      // Templates write arguments as JSON: give them the object that OpenAI's string holds.
      for (auto& call : out["tool_calls"]) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
        Json& f = call["function"];
        if (f.contains("arguments") && f["arguments"].is_string()) {
          try {
            f["arguments"] = Json::parse(f["arguments"].get<std::string>());
          } catch (const Json::exception&) {
            *err = Bad(p + ".tool_calls", fmt::format("'{}.tool_calls': arguments that are not JSON", p));
            return false;
          }
        }
      }
    }
    if (m.contains("content")) {
      std::string text;
      if (!ContentText(m["content"], i, &text, err)) return false;
      out["content"] = m["content"].is_null() ? Json(nullptr) : Json(text);
    } else if (role != "assistant") {
      *err = Bad(p + ".content", fmt::format("'{}.content' is required for a {} message", p, role));
      return false;
    } else {
      out["content"] = nullptr;
    }
    // An assistant turn that only calls tools: templates test and search its content as text
    // (Qwen3's looks for "</think>" in it), so it is the empty string rather than null.
    if (role == "assistant" && out["content"].is_null() && m.contains("tool_calls")) out["content"] = "";
    if (still_leading && (role == "system" || role == "developer")) {
      *leading_system = i + 1;
    } else {
      still_leading = false;
    }
    messages->push_back(std::move(out));
  }
  return true;
}

}  // namespace

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json ErrorBody(const ApiError& e) {
  nlohmann::json err = {{"message", e.message}, {"type", e.type}};
  err["param"] = e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param);
  err["code"] = e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code);
  return {{"error", err}};
}

bool ParseRequest(Endpoint endpoint, const Json& body, const ModelInfo& model, ApiRequest* out,
                  ApiError* err) {
  if (!body.is_object()) {
    *err = Bad("", fmt::format("the request body must be a JSON object, not {}", TypeName(body)));
    return false;
  }
  const bool chat = endpoint == Endpoint::kChat;
  static const std::set<std::string> kCommon = {"model",
                                                "stream",
                                                "stream_options",
                                                "max_tokens",
                                                "temperature",
                                                "top_p",
                                                "seed",
                                                "stop",
                                                "n",
                                                "logprobs",
                                                "presence_penalty",
                                                "frequency_penalty",
                                                "user",
                                                "top_k",
                                                "min_p",
                                                "repetition_penalty",
                                                "logit_bias",
                                                "ignore_eos",
                                                "return_token_ids",
                                                "pin_prefix",
                                                "metadata",
                                                "store",
                                                "service_tier",
                                                "grammar",
                                                "json_schema"};
  static const std::set<std::string> kChat = {
      "messages",    "max_completion_tokens", "top_logprobs",    "tools",
      "tool_choice", "parallel_tool_calls",   "response_format", "chat_template_kwargs"};
  static const std::set<std::string> kCompletions = {"prompt", "echo", "suffix", "best_of"};
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& k = it.key();
    if (kCommon.count(k) || (chat ? kChat.count(k) : kCompletions.count(k))) continue;
    *err = Bad(k, fmt::format("unrecognized request field '{}'", k));
    return false;
  }
  out->endpoint = endpoint;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) {
      *err = Bad("model", fmt::format("'model' must be a string, not {}", TypeName(*it)));
      return false;
    }
    out->model = it->get<std::string>();
    if (out->model != model.id) {
      *err = Bad("model",
                 fmt::format("the model '{}' does not exist; this server serves '{}'", out->model, model.id));
      err->http_status = 404;
      err->code = "model_not_found";
      return false;
    }
  }
  if (!GetBool(body, "stream", &out->stream, err)) return false;
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) {
      *err = Bad("stream_options", "'stream_options' must be an object");
      return false;
    }
    if (!out->stream) {
      *err = Bad("stream_options", "'stream_options' is only allowed with \"stream\": true");
      return false;
    }
    for (auto f = it->begin(); f != it->end(); ++f) {
      if (f.key() != "include_usage") {
        *err = Bad("stream_options", fmt::format("unrecognized field 'stream_options.{}'", f.key()));
        return false;
      }
    }
    if (!GetBool(*it, "include_usage", &out->include_usage, err)) return false;
  }
  int64_t n = 1;
  if (!GetInt(body, "n", 1, 128, &n, err)) return false;
  if (n != 1) {
    *err = Bad("n", fmt::format("'n' is {}; this server returns one choice per request (n = 1)", n));
    return false;
  }
  if (!chat) {
    int64_t best_of = 1;
    if (!GetInt(body, "best_of", 1, 128, &best_of, err)) return false;
    if (best_of != 1) {
      *err = Bad("best_of", "'best_of' must be 1");
      return false;
    }
    bool echo = false;
    if (!GetBool(body, "echo", &echo, err)) return false;
    if (echo) {
      *err = Bad("echo", "'echo' is not supported");
      return false;
    }
    if (auto it = body.find("suffix"); it != body.end() && !it->is_null()) {
      *err = Bad("suffix", "'suffix' is not supported");
      return false;
    }
  }

  // Sampling. OpenAI's defaults: temperature 1, top_p 1.
  GenerationRequest& g = out->gen;
  double temperature = 1.0, top_p = 1.0, min_p = 0.0, presence = 0.0, frequency = 0.0, repetition = 1.0;
  int64_t top_k = 0;
  if (!GetNumber(body, "temperature", 0, 2, &temperature, err)) return false;
  if (!GetNumber(body, "top_p", 0, 1, &top_p, err)) return false;
  if (!GetNumber(body, "min_p", 0, 1, &min_p, err)) return false;
  if (!GetNumber(body, "presence_penalty", -2, 2, &presence, err)) return false;
  if (!GetNumber(body, "frequency_penalty", -2, 2, &frequency, err)) return false;
  if (!GetNumber(body, "repetition_penalty", 0.01, 10, &repetition, err)) return false;
  if (!GetInt(body, "top_k", 0, 1 << 20, &top_k, err)) return false;
  if (top_p == 0) top_p = 1e-9;  // keeps the likeliest token
  g.sampling.temperature = static_cast<float>(temperature);
  g.sampling.top_p = static_cast<float>(top_p);
  g.sampling.min_p = static_cast<float>(min_p);
  g.sampling.presence_penalty = static_cast<float>(presence);
  g.sampling.frequency_penalty = static_cast<float>(frequency);
  g.sampling.repetition_penalty = static_cast<float>(repetition);
  g.sampling.top_k = static_cast<int32_t>(top_k);
  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() && !it->is_number_unsigned()) {
      *err = Bad("seed", fmt::format("'seed' must be an integer, not {}", TypeName(*it)));
      return false;
    }
    g.sampling.seed =
        it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
  } else {
    g.sampling.seed = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
  }
  // logit_bias: {"TOKEN_ID": BIAS} with BIAS in [-100, 100], added to the token's logit.
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) {
      *err = Bad("logit_bias", "'logit_bias' must be an object mapping token ids to numbers");
      return false;
    }
    if (it->size() > 1024) {
      *err =
          Bad("logit_bias", fmt::format("'logit_bias' has {} entries; at most 1024 are allowed", it->size()));
      return false;
    }
    for (const auto& [key, value] : it->items()) {
      const bool digits = !key.empty() && key.size() <= 9 &&
                          std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
      const int64_t id = digits ? std::stoll(key) : -1;
      if (id < 0 || id >= model.tokenizer->vocab_size()) {
        *err = Bad("logit_bias", fmt::format("'logit_bias' key '{}' is not a token id in [0, {})", key,
                                             model.tokenizer->vocab_size()));
        return false;
      }
      if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100)) {
        *err = Bad("logit_bias",
                   fmt::format("'logit_bias' value for token {} must be a number in [-100, 100]", key));
        return false;
      }
      g.sampling.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
  if (!GetBool(body, "ignore_eos", &g.limits.ignore_eos, err)) return false;
  if (!GetBool(body, "return_token_ids", &out->return_token_ids, err)) return false;

  // Lengths: max_completion_tokens (chat) wins over max_tokens; the default is the rest of the context.
  int64_t max_tokens = -1;
  if (!GetInt(body, "max_tokens", 0, INT64_MAX, &max_tokens, err)) return false;
  if (chat && !GetInt(body, "max_completion_tokens", 0, INT64_MAX, &max_tokens, err)) return false;
  if (!chat && max_tokens < 0) max_tokens = 16;  // the completions API's default
  g.limits.max_tokens = max_tokens < 0 ? model.context : max_tokens;

  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      g.limits.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      if (it->size() > 16) {
        *err = Bad("stop", fmt::format("'stop' has {} strings; at most 16 are allowed", it->size()));
        return false;
      }
      for (const auto& s : *it) {
        if (!s.is_string()) {
          *err = Bad("stop", "'stop' must be a string or an array of strings");
          return false;
        }
        g.limits.stop.push_back(s.get<std::string>());
      }
    } else {
      *err =
          Bad("stop", fmt::format("'stop' must be a string or an array of strings, not {}", TypeName(*it)));
      return false;
    }
    for (const auto& s : g.limits.stop) {
      if (s.empty()) {
        *err = Bad("stop", "'stop' strings must not be empty");
        return false;
      }
    }
  }

  // Log-probabilities: chat has logprobs (bool) + top_logprobs; completions has logprobs (int).
  if (chat) {
    if (!GetBool(body, "logprobs", &out->logprobs, err)) return false;
    int64_t top = 0;
    if (!GetInt(body, "top_logprobs", 0, 20, &top, err)) return false;
    if (top > 0 && !out->logprobs) {
      *err = Bad("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
      return false;
    }
    out->top_logprobs = static_cast<int>(top);
  } else if (auto it = body.find("logprobs"); it != body.end() && !it->is_null()) {
    int64_t top = 0;
    if (!GetInt(body, "logprobs", 0, 5, &top, err)) return false;
    out->logprobs = true;
    out->top_logprobs = static_cast<int>(top);
  }
  g.top_logprobs = out->logprobs ? out->top_logprobs : -1;

  bool pin = false;
  if (!GetBool(body, "pin_prefix", &pin, err)) return false;

  // The prompt.
  const Tokenizer& tok = *model.tokenizer;
  if (chat) {
    if (model.chat_template == nullptr) {
      *err = Bad("messages", "this model has no chat template; use /v1/completions");
      return false;
    }
    Json messages;
    size_t leading_system = 0;
    if (!ParseMessages(body, &messages, &leading_system, err)) return false;
    Json tools = nullptr;
    if (!fields::ParseTools(body, model, out, &tools, err)) return false;
    Json kwargs = Json::object();
    if (auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
      if (!it->is_object()) {
        *err = Bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
        return false;
      }
      kwargs = *it;
    }
    const ModelChatTemplate& mt = model.template_meta;
    auto text = RenderChat(*model.chat_template, messages, tools, true, mt.bos_token, mt.eos_token, kwargs);
    if (!text.ok()) {
      *err = Bad("messages", fmt::format("the model's chat template cannot render these messages: {}",
                                         text.status().message()));
      return false;
    }
    out->prompt_text = *text;
    if (pin && leading_system > 0) {
      // The pinned prefix: the leading system messages as the template renders them alone.
      Json head(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(leading_system));
      auto head_text =
          RenderChat(*model.chat_template, head, tools, false, mt.bos_token, mt.eos_token, kwargs);
      if (head_text.ok() && text->compare(0, head_text->size(), *head_text) == 0) {
        auto ids = tok.Encode(*head_text, EncodeOptions{.add_special = false, .parse_special = true});
        if (ids.ok()) g.pin_tokens = static_cast<int64_t>(ids->size());
      }
    }
  } else {
    auto it = body.find("prompt");
    if (it == body.end() || it->is_null()) {
      *err = Bad("prompt", "'prompt' is required");
      return false;
    }
    if (it->is_string()) {
      out->prompt_text = it->get<std::string>();
    } else if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
      for (const auto& t : *it) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.vocab_size()) {
          *err =
              Bad("prompt", fmt::format("'prompt' token ids must be integers in [0, {})", tok.vocab_size()));
          return false;
        }
        g.prompt.push_back(t.get<int32_t>());
      }
    } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
      out->prompt_text = (*it)[0].get<std::string>();
    } else {
      *err = Bad("prompt", "'prompt' must be a string, one string in an array, or an array of token ids");
      return false;
    }
  }
  if (g.prompt.empty()) {
    auto ids = tok.Encode(out->prompt_text, EncodeOptions{.add_special = !chat, .parse_special = true});
    if (!ids.ok()) {
      *err = Bad(chat ? "messages" : "prompt",
                 fmt::format("the prompt cannot be tokenized: {}", ids.status().message()));
      return false;
    }
    g.prompt = std::move(*ids);
  }
  if (!fields::ParseOutputFormat(body, model, out, err)) return false;
  if (pin && !chat) g.pin_tokens = static_cast<int64_t>(g.prompt.size());
  const int64_t np = static_cast<int64_t>(g.prompt.size());
  if (np == 0) {
    *err = Bad(chat ? "messages" : "prompt", "the prompt is empty");
    return false;
  }
  if (np >= model.context) {
    *err = Bad(
        chat ? "messages" : "prompt",
        fmt::format("this model's context holds {} tokens; the prompt has {} tokens, which leaves no room "
                    "to generate (at most {} prompt tokens)",
                    model.context, np, model.context - 1));
    err->code = "context_length_exceeded";
    return false;
  }
  if (g.limits.max_tokens > model.context - np) g.limits.max_tokens = model.context - np;
  return true;
}

nlohmann::json LogprobsJson(Endpoint endpoint, const std::vector<TokenOut>& tokens, const Tokenizer& tok,
                            int64_t text_offset) {
  auto piece = [&](int32_t id) {
    auto b = tok.TokenBytes(id);
    return b.ok() ? *b : std::string();
  };
  auto bytes = [](const std::string& s) {
    nlohmann::json a = nlohmann::json::array();
    for (unsigned char c : s) a.push_back(static_cast<int>(c));
    return a;
  };
  if (endpoint == Endpoint::kChat) {
    nlohmann::json content = nlohmann::json::array();
    for (const auto& t : tokens) {
      const std::string p = piece(t.id);
      nlohmann::json top = nlohmann::json::array();
      for (const auto& [id, lp] : t.top) {
        const std::string q = piece(id);
        top.push_back({{"token", q}, {"logprob", lp}, {"bytes", bytes(q)}});
      }
      content.push_back({{"token", p}, {"logprob", t.logprob}, {"bytes", bytes(p)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  nlohmann::json toks = nlohmann::json::array(), lps = nlohmann::json::array(),
                 tops = nlohmann::json::array(), offs = nlohmann::json::array();
  for (const auto& t : tokens) {
    const std::string p = piece(t.id);
    toks.push_back(p);
    lps.push_back(t.logprob);
    nlohmann::json top = nlohmann::json::object();
    for (const auto& [id, lp] : t.top) top[piece(id)] = lp;
    tops.push_back(top);
    offs.push_back(text_offset);
    text_offset += static_cast<int64_t>(p.size());
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

nlohmann::json UsageJson(const RequestUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

}  // namespace fak::server
