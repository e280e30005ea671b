// Attribute and item access, and the Python methods of str, dict and list that templates call.
// Mutating methods (list.append, dict.update, ...) are refused, as in jinja2's immutable sandbox.
#include <algorithm>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/py_string.h"

namespace fak::jinja {

namespace {

Result<std::optional<std::string>> OptString(const CallArgs& a, size_t i, std::string_view name) {
  const Value* v = a.Get(i, name);
  if (!v || v->is_none()) return std::optional<std::string>();
  if (!v->is_string())
    return InvalidArgument("argument '{}' must be str or None, not {}", name, v->TypeName());
  return std::optional<std::string>(v->str());
}

Result<std::string> ReqString(const CallArgs& a, size_t i, std::string_view name) {
  const Value* v = a.Get(i, name);
  if (!v) return InvalidArgument("missing required argument '{}'", name);
  if (!v->is_string()) return InvalidArgument("argument '{}' must be str, not {}", name, v->TypeName());
  return v->str();
}

Result<int64_t> OptInt(const CallArgs& a, size_t i, std::string_view name, int64_t dflt) {
  const Value* v = a.Get(i, name);
  if (!v || v->is_none()) return dflt;
  if (!v->is_int() && !v->is_bool())
    return InvalidArgument("argument '{}' must be int, not {}", name, v->TypeName());
  return v->as_int();
}

Value StringList(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.emplace_back(std::move(p));
  return Value::MakeList(std::move(items));
}

// startswith/endswith accept a string or a tuple of strings.
Result<Value> AffixTest(const std::string& s, const CallArgs& a, bool prefix) {
  const Value* arg = a.Get(0, "prefix");
  if (!arg) return InvalidArgument("{} takes at least 1 argument", prefix ? "startswith" : "endswith");
  std::vector<Value> options = arg->is_list() ? arg->list().items : std::vector<Value>{*arg};
  for (const Value& o : options) {
    if (!o.is_string())
      return InvalidArgument("{} first arg must be str or a tuple of str, not {}",
                             prefix ? "startswith" : "endswith", o.TypeName());
    const std::string& x = o.str();
    bool hit = prefix ? s.rfind(x, 0) == 0
                      : (s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0);
    if (hit) return Value(true);
  }
  return Value(false);
}

template <typename Pred>
Value AllChars(const std::string& s, Pred p) {
  std::vector<uint32_t> cps = DecodeUtf8(s);
  return Value(!cps.empty() && std::all_of(cps.begin(), cps.end(), p));
}

Result<Value> StringMethod(const std::string& s, std::string_view m, const CallArgs& a) {
  if (m == "startswith") return AffixTest(s, a, true);
  if (m == "endswith") return AffixTest(s, a, false);
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    FAK_ASSIGN_OR_RETURN(auto chars, OptString(a, 0, "chars"));
    return Value(PyStrip(s, chars, m != "rstrip", m != "lstrip"));
  }
  if (m == "split" || m == "rsplit") {
    FAK_ASSIGN_OR_RETURN(auto sep, OptString(a, 0, "sep"));
    FAK_ASSIGN_OR_RETURN(int64_t maxsplit, OptInt(a, 1, "maxsplit", -1));
    if (sep && sep->empty()) return InvalidArgument("empty separator");
    return StringList(m == "split" ? PySplit(s, sep, maxsplit) : PyRSplit(s, sep, maxsplit));
  }
  if (m == "splitlines") return StringList(SplitLines(s));
  if (m == "upper") return Value(PyUpper(s));
  if (m == "lower") return Value(PyLower(s));
  if (m == "title") return Value(PyTitle(s));
  if (m == "capitalize") return Value(PyCapitalize(s));
  if (m == "replace") {
    FAK_ASSIGN_OR_RETURN(std::string old, ReqString(a, 0, "old"));
    FAK_ASSIGN_OR_RETURN(std::string repl, ReqString(a, 1, "new"));
    FAK_ASSIGN_OR_RETURN(int64_t count, OptInt(a, 2, "count", -1));
    return Value(PyReplace(s, old, repl, count));
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex") {
    FAK_ASSIGN_OR_RETURN(std::string sub, ReqString(a, 0, "sub"));
    int64_t at = PyFind(s, sub, m[0] == 'r');
    if (at < 0 && (m == "index" || m == "rindex")) return InvalidArgument("substring not found");
    return Value(at);
  }
  if (m == "count") {
    FAK_ASSIGN_OR_RETURN(std::string sub, ReqString(a, 0, "sub"));
    return Value(PyCount(s, sub));
  }
  if (m == "join") {
    const Value* it = a.Get(0, "iterable");
    if (!it) return InvalidArgument("join() takes exactly one argument");
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(*it));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return InvalidArgument("sequence item {}: expected str instance, {} found", i, items[i].TypeName());
      }
      if (i) out += s;
      out += items[i].str();
    }
    return Value(std::move(out));
  }
  if (m == "isdigit") return AllChars(s, [](uint32_t c) { return c >= '0' && c <= '9'; });
  if (m == "isalpha") return AllChars(s, [](uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; });
  if (m == "isalnum") {
    return AllChars(
        s, [](uint32_t c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); });
  }
  if (m == "isspace") return AllChars(s, IsPySpace);
  if (m == "islower") return Value(PyLower(s) == s && PyUpper(s) != s);
  if (m == "isupper") return Value(PyUpper(s) == s && PyLower(s) != s);
  return NotFound("'str' object has no attribute '{}'", m);
}

Result<Value> DictMethod(const Value& self, std::string_view m, const CallArgs& a) {
  const Dict& d = self.dict();
  if (m == "items") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.items) out.push_back(Value::MakeList({Value(k), v}, true));
    return Value::MakeList(std::move(out));
  }
  if (m == "keys") {
    std::vector<Value> out;
    for (const auto& kv : d.items) out.emplace_back(kv.first);
    return Value::MakeList(std::move(out));
  }
  if (m == "values") {
    std::vector<Value> out;
    for (const auto& kv : d.items) out.push_back(kv.second);
    return Value::MakeList(std::move(out));
  }
  if (m == "get") {
    const Value* key = a.Get(0, "key");
    if (!key) return InvalidArgument("get expected at least 1 argument, got 0");
    const Value* dflt = a.Get(1, "default");
    const Value* v = key->is_string() ? d.Find(key->str()) : nullptr;
    if (v) return *v;
    return dflt ? *dflt : Value::None();
  }
  if (m == "copy") {
    Value c = Value::MakeDict();
    c.dict().items = d.items;
    return c;
  }
  return NotFound("'dict' object has no attribute '{}'", m);
}

Result<Value> ListMethod(const Value& self, std::string_view m, const CallArgs& a) {
  const auto& items = self.list().items;
  if (m == "index" || m == "count") {
    const Value* x = a.Get(0, "value");
    if (!x) return InvalidArgument("{}() takes exactly one argument", m);
    int64_t count = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!Equals(items[i], *x)) continue;
      if (m == "index") return Value(static_cast<int64_t>(i));
      ++count;
    }
    if (m == "index") return InvalidArgument("{} is not in list", x->Repr());
    return Value(count);
  }
  return NotFound("'{}' object has no attribute '{}'", self.TypeName(), m);
}

bool IsMethod(const Value& obj, std::string_view m) {
  static const char* kStr[] = {"startswith", "endswith",   "strip",      "lstrip",  "rstrip",
                               "split",      "rsplit",     "splitlines", "upper",   "lower",
                               "title",      "capitalize", "replace",    "find",    "rfind",
                               "index",      "rindex",     "count",      "join",    "isdigit",
                               "isalpha",    "isalnum",    "isspace",    "islower", "isupper"};
  static const char* kDict[] = {"items", "keys", "values", "get", "copy"};
  static const char* kList[] = {"index", "count"};
  auto has = [&](auto& table) {
    return std::any_of(std::begin(table), std::end(table), [&](const char* x) { return m == x; });
  };
  if (obj.is_string()) return has(kStr);
  if (obj.is_dict()) return !obj.dict().is_namespace && has(kDict);
  if (obj.is_list()) return has(kList);
  return false;
}

bool IsMutator(const Value& obj, std::string_view m) {
  static const char* kList[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
  static const char* kDict[] = {"pop", "popitem", "setdefault", "update", "clear"};
  auto has = [&](auto& table) {
    return std::any_of(std::begin(table), std::end(table), [&](const char* x) { return m == x; });
  };
  if (obj.is_list()) return has(kList);
  if (obj.is_dict()) return !obj.dict().is_namespace && has(kDict);
  return false;
}

std::string ObjectName(const Value& v) {
  if (v.is_none()) return "None";
  return fmt::format("{} object", v.TypeName());
}

}  // namespace

Result<Value> GetAttr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) {
    std::string hint = obj.undefined_hint();
    return InvalidArgument("{}", hint.empty() ? "value is undefined" : hint);
  }
  if (IsMethod(obj, name)) {
    Value self = obj;
    std::string m(name);
    return Value::MakeFunction(m, [self, m](Interpreter&, const CallArgs& a) -> Result<Value> {
      if (self.is_string()) return StringMethod(self.str(), m, a);
      if (self.is_dict()) return DictMethod(self, m, a);
      return ListMethod(self, m, a);
    });
  }
  if (IsMutator(obj, name)) {
    return Value::Undefined(
        fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, obj.TypeName()));
  }
  if (obj.is_dict()) {
    const Value* v = obj.dict().Find(name);
    if (v) return *v;
  }
  return Value::Undefined(fmt::format("'{}' has no attribute '{}'", ObjectName(obj), name));
}

Result<Value> GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) {
    std::string hint = obj.undefined_hint();
    return InvalidArgument("{}", hint.empty() ? "value is undefined" : hint);
  }
  if (obj.is_dict() && key.is_string()) {
    const Value* v = obj.dict().Find(key.str());
    if (v) return *v;
    return GetAttr(obj, key.str());
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.list().items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n)
        return Value::Undefined(fmt::format("{} has no element {}", ObjectName(obj), key.as_int()));
      return obj.list().items[static_cast<size_t>(i)];
    }
    std::vector<uint32_t> cps = DecodeUtf8(obj.str());
    int64_t n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n)
      return Value::Undefined(fmt::format("{} has no element {}", ObjectName(obj), key.as_int()));
    std::string c;
    AppendUtf8(c, cps[static_cast<size_t>(i)]);
    return Value(std::move(c));
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined(fmt::format("{} has no element {}", ObjectName(obj), key.Repr()));
}

std::vector<std::string> SplitLines(std::string_view s) {
  std::vector<uint32_t> cps = DecodeUtf8(s);
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < cps.size(); ++i) {
    uint32_t c = cps[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
               c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      AppendUtf8(cur, c);
      continue;
    }
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    out.push_back(std::move(cur));
    cur.clear();
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

}  // namespace fak::jinja
