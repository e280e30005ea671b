#include "server/openai.h"

#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <set>

namespace fak::server {
namespace {

using Json = nlohmann::ordered_json;

ApiError Bad(std::string param, std::string message) {
  ApiError e;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

const char* TypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

// Field readers: absent or null leaves the default; a wrong type or range is an error naming it.
bool GetBool(const Json& b, const char* key, bool* v, ApiError* err) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    *err = Bad(key, fmt::format("'{}' must be a boolean, not {}", key, TypeName(*it)));
    return false;
  }
  *v = it->get<bool>();
  return true;
}

bool GetNumber(const Json& b, const char* key, double lo, double hi, double* v, ApiError* err) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return true;
  if (!it->is_number()) {
    *err = Bad(key, fmt::format("'{}' must be a number, not {}", key, TypeName(*it)));
    return false;
  }
  const double x = it->get<double>();
  if (!(x >= lo && x <= hi)) {
    *err = Bad(key, fmt::format("'{}' is {}; it must be between {} and {}", key, x, lo, hi));
    return false;
  }
  *v = x;
  return true;
}

bool GetInt(const Json& b, const char* key, int64_t lo, int64_t hi, int64_t* v, ApiError* err) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return true;
  if (!it->is_number_integer() && !it->is_number_unsigned()) {
    *err = Bad(key, fmt::format("'{}' must be an integer, not {}", key, TypeName(*it)));
    return false;
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    *err = Bad(key, fmt::format("'{}' is too large", key));
    return false;
  }
  const int64_t x = it->get<int64_t>();
  if (x < lo || x > hi) {
    *err = Bad(key, fmt::format("'{}' is {}; it must be between {} and {}", key, x, lo, hi));
    return false;
  }
  *v = x;
  return true;
}

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

// A grammar for the request from grammar text; `param` names the field it came from.
bool UseGrammar(const std::string& text, const std::string& param, const ModelInfo& model, ApiRequest* out,
                ApiError* err, const std::string& trigger = "") {
  if (model.grammars == nullptr) {
    *err = Bad(param, fmt::format("'{}' is not supported by this server", param));
    return false;
  }
  auto a = model.grammars->Get(text);
  if (!a.ok()) {
    *err = Bad(param, fmt::format("'{}': {}", param, a.status().message()));
    return false;
  }
  out->gen.limits.grammar = *a;
  out->gen.limits.grammar_trigger = trigger;
  return true;
}

// response_format (chat), and the extensions "json_schema" (a schema) and "grammar" (grammar text,
// docs/grammar.md) on both endpoints. At most one of them.
bool ParseOutputFormat(const Json& body, const ModelInfo& model, ApiRequest* out, ApiError* err) {
  int given = 0;
  std::string text, param;
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string()) {
      *err = Bad("response_format", "'response_format' must be an object with a string 'type'");
      return false;
    }
    const std::string type = (*it)["type"].get<std::string>();
    for (auto f = it->begin(); f != it->end(); ++f) {
      if (f.key() != "type" && f.key() != "json_schema") {
        *err = Bad("response_format", fmt::format("unrecognized field 'response_format.{}'", f.key()));
        return false;
      }
    }
    if (type == "json_object") {
      text = grammar::JsonObjectGrammar();
      param = "response_format";
      ++given;
    } else if (type == "json_schema") {
      const auto js = it->find("json_schema");
      if (js == it->end() || !js->is_object() || !js->contains("schema")) {
        *err = Bad("response_format.json_schema",
                   "'response_format.json_schema' must be an object with a 'schema' (and a 'name')");
        return false;
      }
      for (auto f = js->begin(); f != js->end(); ++f) {
        static const std::set<std::string> kFields = {"name", "schema", "strict", "description"};
        if (!kFields.count(f.key())) {
          *err = Bad("response_format.json_schema",
                     fmt::format("unrecognized field 'response_format.json_schema.{}'", f.key()));
          return false;
        }
      }
      auto g = grammar::JsonSchemaToGrammar((*js)["schema"]);
      if (!g.ok()) {
        *err = Bad("response_format.json_schema.schema", g.status().message());
        return false;
      }
      text = *g;
      param = "response_format.json_schema.schema";
      ++given;
    } else if (type != "text") {
      *err =
          Bad("response_format.type",
              fmt::format("'response_format.type' is '{}'; expected text, json_object or json_schema", type));
      return false;
    }
  }
  if (auto it = body.find("json_schema"); it != body.end() && !it->is_null()) {
    auto g = grammar::JsonSchemaToGrammar(*it);
    if (!g.ok()) {
      *err = Bad("json_schema", g.status().message());
      return false;
    }
    text = *g;
    param = "json_schema";
    ++given;
  }
  if (auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) {
      *err = Bad("grammar", "'grammar' must be a string (grammar text)");
      return false;
    }
    text = it->get<std::string>();
    param = "grammar";
    ++given;
  }
  if (given > 1) {
    *err = Bad(param, "give at most one of 'response_format', 'json_schema' and 'grammar'");
    return false;
  }
  if (given == 0) return true;
  if (out->gen.limits.grammar) {
    *err = Bad(
        param,
        fmt::format("'{}' together with tool calls is not supported (use \"tool_choice\": \"none\")", param));
    return false;
  }
  return UseGrammar(text, param, model, out, err);
}

bool ValidToolName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// tools, tool_choice and parallel_tool_calls. `tools_out`: what the template renders (null: none).
bool ParseTools(const Json& body, const ModelInfo& model, ApiRequest* out, Json* tools_out, ApiError* err) {
  std::vector<ToolSpec> tools;
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) {
      *err = Bad("tools", "'tools' must be an array");
      return false;
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& t = (*it)[i];
      const std::string p = fmt::format("tools[{}]", i);
      if (!t.is_object() || !t.contains("type") || t["type"] != "function" || !t.contains("function") ||
          !t["function"].is_object()) {
        *err = Bad(p, fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{...}}}}", p));
        return false;
      }
      const Json& f = t["function"];
      if (!f.contains("name") || !f["name"].is_string() || !ValidToolName(f["name"].get<std::string>())) {
        *err = Bad(p + ".function.name",
                   fmt::format("'{}.function.name' must be 1 to 64 letters, digits, '_' or '-'", p));
        return false;
      }
      ToolSpec spec;
      spec.name = f["name"].get<std::string>();
      for (const auto& other : tools) {
        if (other.name == spec.name) {
          *err = Bad(p + ".function.name", fmt::format("the tool name '{}' is given twice", spec.name));
          return false;
        }
      }
      spec.parameters = Json{{"type", "object"}};
      if (auto pa = f.find("parameters"); pa != f.end() && !pa->is_null()) {
        if (!pa->is_object()) {
          *err = Bad(p + ".function.parameters",
                     fmt::format("'{}.function.parameters' must be a JSON schema object", p));
          return false;
        }
        spec.parameters = *pa;
      }
      tools.push_back(std::move(spec));
    }
  }
  std::string choice = tools.empty() ? "none" : "auto";
  int only = -1;
  if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      choice = it->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required") {
        *err = Bad("tool_choice", fmt::format("'tool_choice' is '{}'; expected none, auto, required or "
                                              "{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}",
                                              choice));
        return false;
      }
    } else if (it->is_object() && it->contains("function") && (*it)["function"].is_object() &&
               (*it)["function"].contains("name") && (*it)["function"]["name"].is_string()) {
      const std::string name = (*it)["function"]["name"].get<std::string>();
      for (size_t i = 0; i < tools.size(); ++i) {
        if (tools[i].name == name) only = static_cast<int>(i);
      }
      if (only < 0) {
        *err = Bad("tool_choice",
                   fmt::format("'tool_choice' names the function '{}', which is not in 'tools'", name));
        return false;
      }
      choice = "named";
    } else {
      *err = Bad("tool_choice",
                 "'tool_choice' must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}");
      return false;
    }
    if (choice != "none" && tools.empty()) {
      *err = Bad("tool_choice", "'tool_choice' needs 'tools'");
      return false;
    }
  }
  bool parallel = true;
  if (!GetBool(body, "parallel_tool_calls", &parallel, err)) return false;
  if (tools.empty()) return true;
  *tools_out = body["tools"];  // offered to the template even with "none", as OpenAI and vLLM do
  if (choice == "none") return true;
  out->parse_tool_calls = true;
  for (const auto& t : tools) out->tool_names.push_back(t.name);
  if (choice == "required" || choice == "named") {
    auto g = ForcedCallGrammar(model.tool_format, tools, only, parallel);
    if (!g.ok()) {
      *err = Bad("tools", g.status().message());
      return false;
    }
    return UseGrammar(*g, "tools", model, out, err);
  }
  auto lazy = AutoCallGrammar(model.tool_format, tools, parallel);
  if (!lazy.ok()) {
    *err = Bad("tools", lazy.status().message());
    return false;
  }
  if (lazy->trigger.empty()) return true;
  return UseGrammar(lazy->grammar, "tools", model, out, err, lazy->trigger);
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
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) {
      *err = Bad("logit_bias", "'logit_bias' must be an object");
      return false;
    }
    if (!it->empty()) {
      *err = Bad("logit_bias", "'logit_bias' is not supported");
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
    if (!ParseTools(body, model, out, &tools, err)) return false;
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
  if (!ParseOutputFormat(body, model, out, err)) return false;
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
