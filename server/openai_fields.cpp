#include "server/openai_fields.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "grammar/json_schema.h"

namespace fak::server::fields {

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

namespace {

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

}  // namespace

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

namespace {

bool ValidToolName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

}  // namespace

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

}  // namespace fak::server::fields
