#include "server/tool_calls.h"

#include <random>

#include <fmt/format.h>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace fak::server {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistral = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

std::string Lit(std::string_view s) {
  std::string out;
  grammar::AppendLiteral(&out, s);
  return out;
}

std::string CallId() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

std::string Trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string_view::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(a, b - a + 1));
}

// Rules `args<i>` for every tool's arguments and `call` choosing among the tools (or the one).
// `name_key`/`args_key`: how the format spells them.
Result<std::string> CallRules(const std::vector<ToolSpec>& tools, int only, const char* args_key) {
  std::string rules;
  std::string call = "call ::= \"{\\\"name\\\": \" (";
  bool first = true;
  for (size_t i = 0; i < tools.size(); ++i) {
    if (only >= 0 && static_cast<int>(i) != only) continue;
    const std::string name = fmt::format("args{}", i);
    Status st = grammar::AppendJsonSchemaRules(tools[i].parameters, name, &rules);
    if (!st.ok()) {
      return Status(st.code(), fmt::format("tool '{}' parameters: {}", tools[i].name, st.message()));
    }
    call += fmt::format("{}{} {} {}", first ? "" : " | ", Lit(Json(tools[i].name).dump()),
                        Lit(fmt::format(", \"{}\": ", args_key)), name);
    first = false;
  }
  call += ") \"}\"\n";
  return call + rules;
}

}  // namespace

ToolFormat DetectToolFormat(const std::string& src) {
  if (src.find(kHermesOpen) != std::string::npos) return ToolFormat::kHermes;
  if (src.find(kMistral) != std::string::npos) return ToolFormat::kMistral;
  if (src.find(kPythonTag) != std::string::npos || src.find("\"parameters\": ") != std::string::npos) {
    return ToolFormat::kLlama3;
  }
  return ToolFormat::kHermes;
}

const char* ToolFormatName(ToolFormat f) {
  switch (f) {
    case ToolFormat::kHermes: return "hermes";
    case ToolFormat::kLlama3: return "llama3";
    case ToolFormat::kMistral: return "mistral";
  }
  return "?";
}

Result<std::string> ForcedCallGrammar(ToolFormat f, const std::vector<ToolSpec>& tools, int only,
                                      bool parallel) {
  const char* key = f == ToolFormat::kLlama3 ? "parameters" : "arguments";
  FAK_ASSIGN_OR_RETURN(std::string rules, CallRules(tools, only, key));
  switch (f) {
    case ToolFormat::kHermes: {
      const std::string one = Lit("<tool_call>\n") + " call " + Lit("\n</tool_call>");
      return fmt::format("root ::= {}{}\n", one, parallel ? " (" + Lit("\n") + " " + one + ")*" : "") + rules;
    }
    case ToolFormat::kLlama3: return "root ::= call\n" + rules;
    case ToolFormat::kMistral:
      return fmt::format("root ::= {} \"[\" call{} \"]\"\n", Lit("[TOOL_CALLS] "),
                         parallel ? " (\", \" call)*" : "") +
             rules;
  }
  return Internal("unknown tool format");
}

Result<LazyToolGrammar> AutoCallGrammar(ToolFormat f, const std::vector<ToolSpec>& tools, bool parallel) {
  LazyToolGrammar lazy;
  if (f == ToolFormat::kLlama3) return lazy;
  const char* key = "arguments";
  FAK_ASSIGN_OR_RETURN(std::string rules, CallRules(tools, -1, key));
  if (f == ToolFormat::kHermes) {
    lazy.trigger = std::string(kHermesOpen);
    const std::string rest = Lit("\n") + " call " + Lit("\n</tool_call>");
    lazy.grammar =
        fmt::format("root ::= {}{}\n", rest,
                    parallel ? " (" + Lit("\n<tool_call>\n") + " call " + Lit("\n</tool_call>") + ")*" : "") +
        rules;
  } else {
    lazy.trigger = std::string(kMistral);
    lazy.grammar =
        fmt::format("root ::= \" \"? \"[\" call{} \"]\"\n", parallel ? " (\", \" call)*" : "") + rules;
  }
  return lazy;
}

ToolCallParser::ToolCallParser(ToolFormat f, std::vector<std::string> known_tools)
    : f_(f), known_(std::move(known_tools)) {}

std::string ToolCallParser::Push(const std::string& text) {
  if (in_calls_) {
    call_text_ += text;
    return "";
  }
  held_ += text;
  if (f_ == ToolFormat::kLlama3) {
    if (started_) return std::exchange(held_, "");
    const std::string t = Trim(held_);
    if (t.empty()) return "";
    if (t[0] == '{' || t.rfind(kPythonTag, 0) == 0) {
      in_calls_ = true;
      call_text_ = std::exchange(held_, "");
      return "";
    }
    if (kPythonTag.substr(0, t.size()) == t) return "";
    started_ = true;
    return std::exchange(held_, "");
  }
  const std::string_view marker = f_ == ToolFormat::kHermes ? kHermesOpen : kMistral;
  if (const size_t at = held_.find(marker); at != std::string::npos) {
    std::string out = held_.substr(0, at);
    call_text_ = held_.substr(at);
    held_.clear();
    in_calls_ = true;
    return out;
  }
  size_t hold = 0;
  for (size_t n = std::min(marker.size() - 1, held_.size()); n > 0; --n) {
    if (held_.compare(held_.size() - n, n, marker.substr(0, n)) == 0) {
      hold = n;
      break;
    }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string ToolCallParser::Finish(std::vector<ToolCall>* calls, bool truncated) {
  std::string out = std::exchange(held_, "");
  calls->clear();
  if (!in_calls_) return out;
  if (ParseCalls(call_text_, truncated, calls)) return out;
  calls->clear();
  return out + call_text_;
}

bool ToolCallParser::ParseCalls(const std::string& body, bool truncated, std::vector<ToolCall>* calls) const {
  auto add = [&](const Json& j, const char* args_key) {
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
    const std::string name = j["name"].get<std::string>();
    if (!known_.empty() && std::find(known_.begin(), known_.end(), name) == known_.end()) return false;
    const Json* args = nullptr;
    for (const char* k : {args_key, "arguments", "parameters"}) {
      if (j.contains(k)) {
        args = &j[k];
        break;
      }
    }
    ToolCall c;
    c.id = CallId();
    c.name = name;
    if (args == nullptr) {
      c.arguments = "{}";
    } else if (args->is_string()) {
      try {  // arguments as a JSON string: they must hold JSON themselves
        c.arguments = Json::parse(args->get<std::string>()).dump();
      } catch (const Json::exception&) {
        return false;
      }
    } else {
      c.arguments = args->dump();
    }
    calls->push_back(std::move(c));
    return true;
  };
  try {
    if (f_ == ToolFormat::kHermes) {
      size_t pos = 0;
      while (true) {
        const size_t open = body.find(kHermesOpen, pos);
        if (open == std::string::npos) {
          if (!Trim(body.substr(pos)).empty()) return false;
          break;
        }
        if (!Trim(body.substr(pos, open - pos)).empty()) return false;
        const size_t start = open + kHermesOpen.size();
        const size_t close = body.find(kHermesClose, start);
        const std::string inner =
            body.substr(start, close == std::string::npos ? std::string::npos : close - start);
        if (close == std::string::npos && truncated && !calls->empty()) break;  // cut off mid-call
        if (!add(Json::parse(Trim(inner)), "arguments")) return false;
        if (close == std::string::npos) break;
        pos = close + kHermesClose.size();
      }
      return !calls->empty();
    }
    if (f_ == ToolFormat::kMistral) {
      const Json list = Json::parse(Trim(std::string_view(body).substr(kMistral.size())));
      if (!list.is_array() || list.empty()) return false;
      for (const auto& j : list) {
        if (!add(j, "arguments")) return false;
      }
      return true;
    }
    std::string_view b = body;
    const std::string t = Trim(b);
    b = t;
    if (b.rfind(kPythonTag, 0) == 0) b.remove_prefix(kPythonTag.size());
    return add(Json::parse(Trim(b)), "parameters");
  } catch (const Json::exception&) {
    return false;
  }
}

}  // namespace fak::server
