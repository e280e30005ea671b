#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "grammar/grammar.h"
#include "grammar/json_pattern.h"
#include "tokenizer/unicode.h"

namespace fak::grammar {

namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDigits = 15;
constexpr int kMaxSchemaDepth = 64;  // digits of an unbounded number's parts
constexpr int64_t kMaxBound = 1'000'000'000'000'000'000;

std::string Lit(std::string_view s) {
  std::string out;
  AppendLiteral(&out, s);
  return out;
}

// Digits of a number between lo and hi with the same number of digits (decimal strings).
std::string DigitRange(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return Lit(lo);
  const size_t rest = lo.size() - 1;
  auto tail = [rest](std::string_view head) {
    return rest == 0 ? std::string(head) : fmt::format("{} [0-9]{{{}}}", head, rest);
  };
  if (lo[0] == hi[0])
    return fmt::format("{} ({})", Lit(lo.substr(0, 1)), DigitRange(lo.substr(1), hi.substr(1)));
  const bool lo_zeros = lo.find_first_not_of('0', 1) == std::string::npos;
  const bool hi_nines = hi.find_first_not_of('9', 1) == std::string::npos;
  if (lo_zeros && hi_nines) return tail(fmt::format("[{}-{}]", lo[0], hi[0]));
  std::vector<std::string> alts;
  char first = lo[0];
  if (!lo_zeros) {
    alts.push_back(
        fmt::format("{} ({})", Lit(lo.substr(0, 1)), DigitRange(lo.substr(1), std::string(rest, '9'))));
    ++first;
  }
  char last = hi[0];
  if (!hi_nines) --last;
  if (first <= last) alts.push_back(tail(fmt::format("[{}-{}]", first, last)));
  if (!hi_nines) {
    alts.push_back(
        fmt::format("{} ({})", Lit(hi.substr(0, 1)), DigitRange(std::string(rest, '0'), hi.substr(1))));
  }
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

// Non-negative integers in [lo, hi] without leading zeros; hi < 0: unbounded. Empty when none.
std::string NonnegRange(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  const std::string los = std::to_string(lo);
  const size_t max_len = hi < 0 ? static_cast<size_t>(kMaxDigits) : std::to_string(hi).size();
  for (size_t len = los.size(); len <= max_len; ++len) {
    const std::string low = len == los.size() ? los : "1" + std::string(len - 1, '0');
    std::string high(len, '9');
    if (hi >= 0 && len == max_len) high = std::to_string(hi);
    if (hi < 0 && len == los.size() + 1) {  // every longer number: one rule for the rest
      alts.push_back(fmt::format("[1-9] [0-9]{{{},{}}}", len - 1, kMaxDigits - 1));
      break;
    }
    if (low.size() == high.size() && low <= high) alts.push_back(DigitRange(low, high));
  }
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

class Compiler {
 public:
  Compiler(const Json& root, std::string prefix) : root_(root), p_(std::move(prefix)) {}

  Result<std::string> Value(const Json& s, const std::string& ptr);
  std::string Any() { return Prim("value"); }
  std::string AnyObject() { return Prim("object"); }
  const std::string& text() const { return text_; }

 private:
  Status Bad(const std::string& ptr, const std::string& what) const {
    return InvalidArgument("JSON schema at '#{}': {}", ptr, what);
  }
  std::string Define(const std::string& hint, const std::string& body) {
    const std::string name = fmt::format("{}-{}{}", p_, hint, count_++);
    text_ += name + " ::= " + body + "\n";
    return name;
  }
  std::string Prim(const std::string& which);
  Result<std::string> Object(const Json& s, const std::string& ptr);
  Result<std::string> Array(const Json& s, const std::string& ptr);
  Result<std::string> String(const Json& s, const std::string& ptr);
  Result<std::string> Integer(const Json& s, const std::string& ptr);
  Result<std::string> Number(const Json& s, const std::string& ptr);
  Result<std::string> Pattern(const std::string& re, const std::string& ptr);
  Result<std::string> Ref(const std::string& ref, const std::string& ptr);
  Status Bounds(const Json& s, const std::string& ptr, bool integer, std::optional<double>* lo, bool* lo_ex,
                std::optional<double>* hi, bool* hi_ex) const;

  const Json& root_;
  std::string p_;
  std::string text_;
  int count_ = 0;
  int depth_ = 0;
  std::set<std::string> prims_;
  std::map<std::string, std::string> refs_;
};

std::string Compiler::Prim(const std::string& which) {
  const std::string name = p_ + "-" + which;
  if (!prims_.insert(which).second) return name;
  const std::string ws = Prim("ws");
  if (which == "ws") {
    text_ += name + " ::= (\" \" | \"\\n\" [ ]{0,16})?\n";  // none, a space, or a newline and indent
  } else if (which == "char") {
    // Any character but a quote, a backslash or a control; escapes (no lone surrogates).
    text_ += name +
             " ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | "
             "[dD] [0-7] [0-9a-fA-F]{2}))\n";
  } else if (which == "string") {
    text_ += fmt::format("{} ::= \"\\\"\" {}* \"\\\"\"\n", name, Prim("char"));
  } else if (which == "integer") {
    text_ += fmt::format("{} ::= \"-\"? (\"0\" | [1-9] [0-9]{{0,{}}})\n", name, kMaxDigits - 1);
  } else if (which == "number") {
    text_ += fmt::format("{} ::= {} (\".\" [0-9]{{1,{}}})? ([eE] [-+]? [0-9]{{1,3}})?\n", name,
                         Prim("integer"), kMaxDigits);
  } else if (which == "value") {
    text_ += fmt::format("{} ::= {} | {} | {} | {} | \"true\" | \"false\" | \"null\"\n", name, Prim("object"),
                         Prim("array"), Prim("string"), Prim("number"));
  } else if (which == "object") {
    const std::string kv = fmt::format("{} {} \":\" {} {} {}", Prim("string"), ws, ws, Prim("value"), ws);
    text_ += fmt::format("{} ::= \"{{\" {} ({} (\",\" {} {})*)? \"}}\"\n", name, ws, kv, ws, kv);
  } else if (which == "array") {
    const std::string item = fmt::format("{} {}", Prim("value"), ws);
    text_ += fmt::format("{} ::= \"[\" {} ({} (\",\" {} {})*)? \"]\"\n", name, ws, item, ws, item);
  }
  return name;
}

Result<std::string> Compiler::Value(const Json& s, const std::string& ptr) {
  // Nesting is bounded: the schema's depth is the compiler's recursion depth.
  if (++depth_ > kMaxSchemaDepth) {
    return Bad(ptr, fmt::format("the schema nests deeper than {} levels", kMaxSchemaDepth));
  }
  struct Leave {
    int* d;
    ~Leave() { --*d; }
  } leave{&depth_};
  if (s.is_boolean()) {
    if (s.get<bool>()) return Any();
    return Bad(ptr, "the schema 'false' matches nothing");
  }
  if (!s.is_object()) return Bad(ptr, "a schema must be an object or a boolean");
  static const std::set<std::string> kKnown = {
      "type", "properties", "required", "additionalProperties", "enum", "const", "items", "prefixItems",
      "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "minLength",
      "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
      // Annotations: no effect on what validates.
      "title", "description", "default", "examples", "$schema", "$id", "$comment", "readOnly", "writeOnly",
      "deprecated", "strict"};
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (!kKnown.count(it.key())) return Bad(ptr, fmt::format("the keyword '{}' is not supported", it.key()));
  }
  if (s.contains("$ref")) {
    if (s.size() > 1) {
      for (auto it = s.begin(); it != s.end(); ++it) {
        static const std::set<std::string> kBeside = {"$ref",     "title",    "description", "default",
                                                      "examples", "$comment", "$defs",       "definitions"};
        if (!kBeside.count(it.key()))
          return Bad(ptr, fmt::format("'$ref' beside '{}' is not supported", it.key()));
      }
    }
    if (!s["$ref"].is_string()) return Bad(ptr + "/$ref", "'$ref' must be a string");
    return Ref(s["$ref"].get<std::string>(), ptr + "/$ref");
  }
  for (const char* k : {"anyOf", "oneOf", "allOf"}) {
    if (!s.contains(k)) continue;
    const Json& list = s[k];
    if (!list.is_array() || list.empty())
      return Bad(ptr + "/" + k, fmt::format("'{}' must be a non-empty array", k));
    for (const char* other : {"type", "properties", "items", "enum", "const", "anyOf", "oneOf", "allOf"}) {
      if (std::string(other) != k && s.contains(other)) {
        return Bad(ptr, fmt::format("'{}' together with '{}' is not supported", k, other));
      }
    }
    if (std::string(k) == "allOf") {
      if (list.size() != 1) return Bad(ptr + "/allOf", "'allOf' with more than one schema is not supported");
      return Value(list[0], ptr + "/allOf/0");
    }
    std::vector<std::string> alts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto r = Value(list[i], fmt::format("{}/{}/{}", ptr, k, i));
      if (!r.ok()) return r.status();
      alts.push_back(*r);
    }
    return Define("alt", JoinAlternatives(alts));
  }
  if (s.contains("const") || s.contains("enum")) {
    Json values = Json::array();
    if (s.contains("const")) values.push_back(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty())
        return Bad(ptr + "/enum", "'enum' must be a non-empty array");
      for (const auto& v : s["enum"]) {
        if (!s.contains("const") || v == s["const"]) values.push_back(v);
      }
      if (s.contains("const")) values = values.size() > 1 ? Json::array({s["const"]}) : Json::array();
    }
    if (values.empty()) return Bad(ptr, "'const' is not among the 'enum' values: nothing validates");
    std::vector<std::string> alts;
    for (const auto& v : values) alts.push_back(Lit(v.dump()));
    return Define("enum", JoinAlternatives(alts));
  }
  std::vector<std::string> types;
  if (auto it = s.find("type"); it != s.end()) {
    if (it->is_string()) {
      types.push_back(it->get<std::string>());
    } else if (it->is_array() && !it->empty()) {
      for (const auto& t : *it) {
        if (!t.is_string()) return Bad(ptr + "/type", "'type' must be a string or an array of strings");
        types.push_back(t.get<std::string>());
      }
    } else {
      return Bad(ptr + "/type", "'type' must be a string or a non-empty array of strings");
    }
  } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
    types.push_back("object");
  } else if (s.contains("items") || s.contains("prefixItems")) {
    types.push_back("array");
  } else {
    return Any();
  }
  std::vector<std::string> alts;
  for (const auto& t : types) {
    Result<std::string> r = std::string();
    if (t == "object") {
      r = Object(s, ptr);
    } else if (t == "array") {
      r = Array(s, ptr);
    } else if (t == "string") {
      r = String(s, ptr);
    } else if (t == "integer") {
      r = Integer(s, ptr);
    } else if (t == "number") {
      r = Number(s, ptr);
    } else if (t == "boolean") {
      r = std::string("(\"true\" | \"false\")");
    } else if (t == "null") {
      r = std::string("\"null\"");
    } else {
      return Bad(ptr + "/type", fmt::format("unknown type '{}'", t));
    }
    if (!r.ok()) return r.status();
    alts.push_back(*r);
  }
  return alts.size() == 1 ? alts[0] : Define("types", JoinAlternatives(alts));
}

Result<std::string> Compiler::Ref(const std::string& ref, const std::string& ptr) {
  if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
  std::string path;
  for (const char* base : {"#/$defs/", "#/definitions/"}) {
    if (ref.rfind(base, 0) == 0) path = ref.substr(1);
  }
  if (path.empty() && ref != "#") {
    return Bad(ptr,
               fmt::format("'$ref' '{}' is not supported (only #, #/$defs/... and #/definitions/...)", ref));
  }
  const Json* target = &root_;
  if (!path.empty()) {
    Json::json_pointer jp;
    try {
      jp = Json::json_pointer(path);
    } catch (const Json::exception&) {
      return Bad(ptr, fmt::format("'$ref' '{}' is not a valid JSON pointer", ref));
    }
    if (!root_.contains(jp)) return Bad(ptr, fmt::format("'$ref' '{}' names nothing in the schema", ref));
    target = &root_.at(jp);
  }
  // Named first so a recursive reference finds it; defined once its body is known.
  const std::string name = fmt::format("{}-ref{}", p_, count_++);
  refs_.emplace(ref, name);
  auto body = Value(*target, path);
  if (!body.ok()) return body.status();
  text_ += name + " ::= " + *body + "\n";
  return name;
}

Result<std::string> Compiler::Object(const Json& s, const std::string& ptr) {
  const std::string ws = Prim("ws");
  std::vector<std::pair<std::string, const Json*>> props;
  static const Json kAnything = true;
  if (auto it = s.find("properties"); it != s.end()) {
    if (!it->is_object()) return Bad(ptr + "/properties", "'properties' must be an object");
    for (auto p = it->begin(); p != it->end(); ++p) props.emplace_back(p.key(), &p.value());
  }
  std::set<std::string> required;
  if (auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) return Bad(ptr + "/required", "'required' must be an array of strings");
    for (const auto& r : *it) {
      if (!r.is_string()) return Bad(ptr + "/required", "'required' must be an array of strings");
      required.insert(r.get<std::string>());
      bool listed = false;
      for (const auto& p : props) listed |= p.first == r.get<std::string>();
      if (!listed) props.emplace_back(r.get<std::string>(), &kAnything);
    }
  }
  const Json* additional = nullptr;
  if (auto it = s.find("additionalProperties"); it != s.end()) {
    if (!it->is_boolean() && !it->is_object()) {
      return Bad(ptr + "/additionalProperties", "'additionalProperties' must be a boolean or a schema");
    }
    if (!(it->is_boolean() && !it->get<bool>())) additional = &*it;
  }
  if (props.empty()) {
    // A free map: any keys, values matching additionalProperties (anything when absent).
    std::string value = Any();
    if (additional != nullptr) {
      auto v = Value(*additional, ptr + "/additionalProperties");
      if (!v.ok()) return v.status();
      value = *v;
    }
    const std::string kv = fmt::format("{} {} \":\" {} {} {}", Prim("string"), ws, ws, value, ws);
    return Define("map", fmt::format("\"{{\" {} ({} (\",\" {} {})*)? \"}}\"", ws, kv, ws, kv));
  }
  // In the schema's order; optional properties may be left out. first[i]: the properties from i on
  // when none came before; rest[i]: the same after at least one (each begins with a comma).
  std::vector<std::string> kv;
  for (size_t i = 0; i < props.size(); ++i) {
    auto v = Value(*props[i].second, ptr + "/properties/" + props[i].first);
    if (!v.ok()) return v.status();
    kv.push_back(fmt::format("{} {} \":\" {} {} {}", Lit(Json(props[i].first).dump()), ws, ws, *v, ws));
  }
  const size_t n = props.size();
  std::vector<std::string> rest(n + 1), first(n + 1);
  rest[n] = "";
  first[n] = "";
  auto ref = [](const std::string& r) { return r.empty() ? std::string() : " " + r; };
  for (size_t i = n; i-- > 0;) {
    const bool req = required.count(props[i].first) > 0;
    const std::string with_rest = fmt::format("\",\" {} {}{}", ws, kv[i], ref(rest[i + 1]));
    rest[i] = Define("rest", req ? with_rest
                                 : fmt::format("({}){}", with_rest,
                                               rest[i + 1].empty() ? " | \"\"" : " | " + rest[i + 1]));
    const std::string with_first = kv[i] + ref(rest[i + 1]);
    first[i] = Define(
        "first", req ? with_first
                     : fmt::format("({}) | {}", with_first, first[i + 1].empty() ? "\"\"" : first[i + 1]));
  }
  return Define("object", fmt::format("\"{{\" {} {} \"}}\"", ws, first[0]));
}

Result<std::string> Compiler::Array(const Json& s, const std::string& ptr) {
  const std::string ws = Prim("ws");
  int64_t min = 0, max = -1;
  for (const char* k : {"minItems", "maxItems"}) {
    if (auto it = s.find(k); it != s.end()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 10000) {
        return Bad(ptr + "/" + k, fmt::format("'{}' must be an integer in [0, 10000]", k));
      }
      (std::string(k) == "minItems" ? min : max) = it->get<int64_t>();
    }
  }
  if (max >= 0 && max < min) return Bad(ptr, "'maxItems' is below 'minItems': nothing validates");
  std::vector<std::string> prefix;
  if (auto it = s.find("prefixItems"); it != s.end()) {
    if (!it->is_array()) return Bad(ptr + "/prefixItems", "'prefixItems' must be an array of schemas");
    for (size_t i = 0; i < it->size(); ++i) {
      auto v = Value((*it)[i], fmt::format("{}/prefixItems/{}", ptr, i));
      if (!v.ok()) return v.status();
      prefix.push_back(*v);
    }
  }
  std::string item = Any();
  bool more = true;
  if (auto it = s.find("items"); it != s.end()) {
    if (it->is_boolean() && !it->get<bool>()) {
      more = false;
    } else {
      auto v = Value(*it, ptr + "/items");
      if (!v.ok()) return v.status();
      item = *v;
    }
  }
  // Item i's schema: the prefix's, then `item`. Positions 0..min-1 are required.
  const int64_t np = static_cast<int64_t>(prefix.size());
  if (!more) max = max < 0 ? np : std::min(max, np);
  if (max >= 0 && min > max)
    return Bad(ptr, "'minItems' exceeds what 'prefixItems' with 'items': false allows");
  auto schema_at = [&](int64_t i) { return i < np ? prefix[static_cast<size_t>(i)] : item; };
  // tail(i): what may follow once i items are written (each begins with a comma).
  std::string tail;  // empty: nothing more
  const int64_t explicit_end = max < 0 ? std::max(min, np) : max;
  if (max < 0) tail = Define("more", fmt::format("(\",\" {} {} {})*", ws, item, ws));
  for (int64_t i = explicit_end; i-- > 1;) {
    const std::string one =
        fmt::format("\",\" {} {} {}{}", ws, schema_at(i), ws, tail.empty() ? "" : " " + tail);
    tail = Define("items", i < min ? one : fmt::format("({}) | \"\"", one));
  }
  std::string body;
  if (explicit_end == 0 && max < 0) {
    body = fmt::format("({} {} {})?", item, ws, tail);
  } else if (explicit_end > 0) {
    const std::string first = fmt::format("{} {}{}", schema_at(0), ws, tail.empty() ? "" : " " + tail);
    body = min > 0 ? first : fmt::format("({})?", first);
  }
  return Define("array", fmt::format("\"[\" {} {} \"]\"", ws, body.empty() ? "\"\"" : body));
}

Result<std::string> Compiler::String(const Json& s, const std::string& ptr) {
  const std::string ch = Prim("char");
  int64_t min = 0, max = -1;
  for (const char* k : {"minLength", "maxLength"}) {
    if (auto it = s.find(k); it != s.end()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 10000) {
        return Bad(ptr + "/" + k, fmt::format("'{}' must be an integer in [0, 10000]", k));
      }
      (std::string(k) == "minLength" ? min : max) = it->get<int64_t>();
    }
  }
  if (max >= 0 && max < min) return Bad(ptr, "'maxLength' is below 'minLength': nothing validates");
  const bool lengths = min > 0 || max >= 0;
  if (auto it = s.find("format"); it != s.end()) {
    if (!it->is_string()) return Bad(ptr + "/format", "'format' must be a string");
    if (lengths || s.contains("pattern"))
      return Bad(ptr, "'format' together with lengths or 'pattern' is not supported");
    const std::string f = it->get<std::string>();
    // Real calendar dates (February to the 28th: the year is not known while the day is written).
    const std::string date =
        "[1-9] [0-9]{3} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | "
        "(\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" (\"0\" [1-9] | \"1\" "
        "[0-9] | "
        "\"2\" [0-8]))";
    const std::string time =
        "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [+-] "
        "([01] [0-9] | "
        "\"2\" [0-3]) \":\" [0-5] [0-9])";
    std::string body;
    if (f == "date") {
      body = date;
    } else if (f == "time") {
      body = time;
    } else if (f == "date-time") {
      body = date + " \"T\" " + time;
    } else if (f == "uuid") {
      body = "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}";
    } else {
      return Bad(ptr + "/format",
                 fmt::format("the format '{}' is not supported (date, time, date-time, uuid)", f));
    }
    return Define("format", "\"\\\"\" " + body + " \"\\\"\"");
  }
  if (auto it = s.find("pattern"); it != s.end()) {
    if (!it->is_string()) return Bad(ptr + "/pattern", "'pattern' must be a string");
    if (lengths) return Bad(ptr, "'pattern' together with 'minLength'/'maxLength' is not supported");
    return Pattern(it->get<std::string>(), ptr + "/pattern");
  }
  if (!lengths) return Prim("string");
  const std::string rep = max < 0 ? fmt::format("{{{},}}", min) : fmt::format("{{{},{}}}", min, max);
  return Define("string", fmt::format("\"\\\"\" {}{} \"\\\"\"", ch, rep));
}

Status Compiler::Bounds(const Json& s, const std::string& ptr, bool integer, std::optional<double>* lo,
                        bool* lo_ex, std::optional<double>* hi, bool* hi_ex) const {
  *lo_ex = *hi_ex = false;
  auto num = [&](const char* k, std::optional<double>* out) -> Status {
    auto it = s.find(k);
    if (it == s.end()) return Status::Ok();
    if (!it->is_number()) return Bad(ptr + "/" + k, fmt::format("'{}' must be a number", k));
    const double v = it->get<double>();
    if (!std::isfinite(v) || std::fabs(v) > static_cast<double>(kMaxBound)) {
      return Bad(ptr + "/" + k, fmt::format("'{}' is out of the supported range (|x| <= 1e18)", k));
    }
    if (!integer && v != std::floor(v)) {
      return Bad(ptr + "/" + k, fmt::format("a non-integer '{}' on a number is not supported", k));
    }
    *out = v;
    return Status::Ok();
  };
  FAK_RETURN_IF_ERROR(num("minimum", lo));
  FAK_RETURN_IF_ERROR(num("maximum", hi));
  for (const auto& [k, bound, ex] :
       {std::tuple{"exclusiveMinimum", lo, lo_ex}, std::tuple{"exclusiveMaximum", hi, hi_ex}}) {
    auto it = s.find(k);
    if (it == s.end()) continue;
    if (it->is_boolean()) {  // draft 4: a flag on minimum/maximum
      *ex = it->get<bool>();
      continue;
    }
    std::optional<double> v;
    FAK_RETURN_IF_ERROR(num(k, &v));
    const bool is_lo = std::string(k) == "exclusiveMinimum";
    if (!bound->has_value() || (is_lo ? *v >= **bound : *v <= **bound)) {
      *bound = v;
      *ex = true;
    }
  }
  if (s.contains("multipleOf")) return Bad(ptr, "'multipleOf' is not supported");
  return Status::Ok();
}

Result<std::string> Compiler::Integer(const Json& s, const std::string& ptr) {
  std::optional<double> lo, hi;
  bool lo_ex = false, hi_ex = false;
  FAK_RETURN_IF_ERROR(Bounds(s, ptr, true, &lo, &lo_ex, &hi, &hi_ex));
  if (!lo && !hi) return Prim("integer");
  std::optional<int64_t> a, b;
  if (lo) a = static_cast<int64_t>(lo_ex ? std::floor(*lo) + 1 : std::ceil(*lo));
  if (hi) b = static_cast<int64_t>(hi_ex ? std::ceil(*hi) - 1 : std::floor(*hi));
  if (a && b && *a > *b) return Bad(ptr, "the bounds leave no integer: nothing validates");
  std::vector<std::string> alts;
  if (!a || *a < 0) {  // negative values: "-" then |x| in [max(1, -b), -a]
    const int64_t abs_lo = b && *b < 0 ? -*b : 1;
    const int64_t abs_hi = a ? -*a : -1;
    const std::string r = NonnegRange(abs_lo, abs_hi);
    if (!r.empty()) alts.push_back("\"-\" (" + r + ")");
  }
  if (!b || *b >= 0) {
    const std::string r = NonnegRange(a ? std::max<int64_t>(*a, 0) : 0, b ? *b : -1);
    if (!r.empty()) alts.push_back(r);
  }
  return Define("int", JoinAlternatives(alts));
}

Result<std::string> Compiler::Number(const Json& s, const std::string& ptr) {
  std::optional<double> lo, hi;
  bool lo_ex = false, hi_ex = false;
  FAK_RETURN_IF_ERROR(Bounds(s, ptr, false, &lo, &lo_ex, &hi, &hi_ex));
  if (!lo && !hi) return Prim("number");
  if (lo && hi && (*lo > *hi || (*lo == *hi && (lo_ex || hi_ex)))) {
    return Bad(ptr, "the bounds leave no number: nothing validates");
  }
  const std::string frac = fmt::format("(\".\" [0-9]{{1,{}}})?", kMaxDigits);
  const std::string nonzero = fmt::format("\".\" [0-9]{{0,{}}} [1-9]", kMaxDigits - 1);
  const std::string zeros = fmt::format("(\".\" \"0\"{{1,{}}})?", kMaxDigits);
  // |x| in [L, H] for one sign (integers L <= H or H absent): the integer part below H with any
  // fraction, H itself with zeros only, L itself with a non-zero fraction when L is excluded.
  auto magnitude = [&](int64_t l, bool l_ex, std::optional<int64_t> h, bool h_ex) {
    std::vector<std::string> alts;
    const int64_t first = l_ex ? l + 1 : l;
    if (!h) {
      alts.push_back("(" + NonnegRange(first, -1) + ") " + frac);
    } else if (first <= *h - 1) {
      alts.push_back("(" + NonnegRange(first, *h - 1) + ") " + frac);
    }
    if (l_ex && (!h || l < *h)) alts.push_back(Lit(std::to_string(l)) + " " + nonzero);
    if (h && !h_ex && (!l_ex || *h > l) && *h >= first) alts.push_back(Lit(std::to_string(*h)) + " " + zeros);
    return alts;
  };
  std::vector<std::string> alts;
  const std::optional<int64_t> a = lo ? std::optional<int64_t>(static_cast<int64_t>(*lo)) : std::nullopt;
  const std::optional<int64_t> b = hi ? std::optional<int64_t>(static_cast<int64_t>(*hi)) : std::nullopt;
  if (!a || *a < 0) {  // x < 0 side: |x| in (max(0, -b), -a]
    const bool hi_neg = b && *b < 0;
    const int64_t l = hi_neg ? -*b : 0;
    const bool l_ex = hi_neg ? hi_ex : true;  // x = 0 belongs to the other side
    for (auto& m : magnitude(l, l_ex, a ? std::optional<int64_t>(-*a) : std::nullopt, lo_ex)) {
      alts.push_back("\"-\" " + m);
    }
  }
  if (!b || *b >= 0) {
    const bool lo_pos = a && *a >= 0;
    for (auto& m : magnitude(lo_pos ? *a : 0, lo_pos && lo_ex, b, hi_ex)) alts.push_back(m);
  }
  if (alts.empty()) return Bad(ptr, "the bounds leave no number: nothing validates");
  return Define("num", JoinAlternatives(alts));
}

Result<std::string> Compiler::Pattern(const std::string& re, const std::string& ptr) {
  auto body = PatternToGrammar(re, Prim("char"));
  if (!body.ok()) return Bad(ptr, body.status().message());
  return Define("pattern", *body);
}

}  // namespace

Status AppendJsonSchemaRules(const Json& schema, const std::string& name, std::string* rules) {
  Compiler c(schema, name);
  auto v = c.Value(schema, "");
  if (!v.ok()) return v.status();
  *rules += c.text();
  *rules += name + " ::= " + *v + "\n";
  return Status::Ok();
}

Result<std::string> JsonSchemaToGrammar(const Json& schema) {
  std::string rules;
  FAK_RETURN_IF_ERROR(AppendJsonSchemaRules(schema, "schema", &rules));
  return "root ::= [ \\t\\n]? schema\n" + rules;
}

std::string JsonObjectGrammar() {
  Compiler c(Json::object(), "json");
  const std::string obj = c.AnyObject();
  return "root ::= [ \\t\\n]? " + obj + "\n" + c.text();
}

}  // namespace fak::grammar
