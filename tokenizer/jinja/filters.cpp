// jinja2's built-in filters (the ones chat templates use) and transformers' tojson.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/py_string.h"

namespace fak::jinja {

namespace {

bool Flag(const CallArgs& a, size_t i, std::string_view name, bool dflt = false) {
  const Value* v = a.Get(i, name);
  return v ? v->Truthy() : dflt;
}

// Resolves "a.b.0" the way jinja2's attribute arguments do (item lookup per part).
Result<Value> LookupPath(const Value& v, const std::string& path) {
  Value cur = v;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    FAK_ASSIGN_OR_RETURN(
        cur, GetItem(cur, numeric ? Value(static_cast<int64_t>(std::atoll(part.c_str()))) : Value(part)));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return cur;
}

Result<Value> AttributeOf(const Value& item, const CallArgs& a, size_t index) {
  const Value* attr = a.Get(index, "attribute");
  if (!attr || attr->is_none()) return item;
  if (attr->is_int()) return GetItem(item, *attr);
  return LookupPath(item, attr->ToString());
}

Result<int64_t> Len(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return static_cast<int64_t>(CodepointCount(v.str()));
    case Kind::kList: return static_cast<int64_t>(v.list().items.size());
    case Kind::kDict:
      if (!v.dict().is_namespace) return static_cast<int64_t>(v.dict().items.size());
      break;
    default: break;
  }
  return InvalidArgument("object of type '{}' has no len()", v.TypeName());
}

// Sort key for sort/unique/min/max/dictsort: strings fold case unless case_sensitive.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(PyLower(v.str()));
  return v;
}

Status SortValues(std::vector<Value>& items, std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Status err;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    Result<bool> lt = reverse ? Less(keys[y], keys[x]) : Less(keys[x], keys[y]);
    if (!lt.ok()) {
      if (err.ok()) err = lt.status();
      return false;
    }
    return *lt;
  });
  FAK_RETURN_IF_ERROR(err);
  std::vector<Value> sorted;
  sorted.reserve(items.size());
  for (size_t i : order) sorted.push_back(items[i]);
  items = std::move(sorted);
  return Status::Ok();
}

Result<Value> ToInt(const Value& v, const Value& dflt) {
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_double())) return dflt;
    return Value(static_cast<int64_t>(v.as_double()));
  }
  if (v.is_string()) {
    std::string s = PyStrip(v.str(), std::nullopt, true, true);
    std::string clean;
    for (char c : s) {
      if (c != '_') clean += c;
    }
    if (!clean.empty()) {
      char* end = nullptr;
      errno = 0;
      long long i = std::strtoll(clean.c_str(), &end, 10);
      if (*end == '\0' && errno == 0) return Value(static_cast<int64_t>(i));
      double d = std::strtod(clean.c_str(), &end);
      if (*end == '\0' && std::isfinite(d)) return Value(static_cast<int64_t>(d));
    }
  }
  return dflt;
}

Result<Value> ToFloat(const Value& v, const Value& dflt) {
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    std::string s = PyStrip(v.str(), std::nullopt, true, true);
    if (!s.empty()) {
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (*end == '\0') return Value(d);
    }
  }
  return dflt;
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Result<Value> ToJsonFilter(const Value& v, const CallArgs& a) {
  JsonDumpOptions o;
  o.ensure_ascii = Flag(a, 0, "ensure_ascii", false);
  if (const Value* indent = a.Get(1, "indent"); indent && !indent->is_none()) {
    if (indent->is_string()) {
      o.indent_text = indent->str();
      o.indent = 0;
    } else if (indent->is_int()) {
      o.indent = static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 64));
    } else {
      return InvalidArgument("tojson: indent must be an int or a string, not {}", indent->TypeName());
    }
  }
  if (const Value* sep = a.Get(2, "separators"); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->list().items.size() != 2 || !sep->list().items[0].is_string() ||
        !sep->list().items[1].is_string()) {
      return InvalidArgument("tojson: separators must be a pair of strings");
    }
    o.separators.emplace(sep->list().items[0].str(), sep->list().items[1].str());
  }
  o.sort_keys = Flag(a, 3, "sort_keys", false);
  FAK_ASSIGN_OR_RETURN(std::string s, ToJson(v, o));
  return Value(std::move(s));
}

Result<Value> Indent(const Value& v, const CallArgs& a) {
  std::string ind = "    ";
  if (const Value* w = a.Get(0, "width"))
    ind = w->is_string() ? w->str() : std::string(std::max<int64_t>(0, w->as_int()), ' ');
  bool first = Flag(a, 1, "first");
  bool blank = Flag(a, 2, "blank");
  std::vector<std::string> lines = SplitLines(v.ToString() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += ind;
    out += lines[i];
  }
  if (first) out = ind + out;
  return Value(std::move(out));
}

Result<Value> Round(const Value& v, const CallArgs& a) {
  const Value* p = a.Get(0, "precision");
  int64_t precision = p ? p->as_int() : 0;
  std::string method = a.Get(1, "method") ? a.Get(1, "method")->ToString() : "common";
  if (!v.is_number()) return InvalidArgument("round: expected a number, got {}", v.TypeName());
  if (method == "common") {
    if (!v.is_float()) return Value(v.as_int());
    if (!std::isfinite(v.as_double()) || precision > 300 || precision < -300) return Value(v.as_double());
    if (precision < 0) {
      double scale = std::pow(10.0, static_cast<double>(-precision));
      return Value(std::nearbyint(v.as_double() / scale) * scale);
    }
    char buf[400];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), v.as_double());  // exact, half-even
    return Value(std::strtod(buf, nullptr));
  }
  if (method != "floor" && method != "ceil") return InvalidArgument("method must be common, ceil or floor");
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  return Value((method == "floor" ? std::floor(x) : std::ceil(x)) / scale);
}

// select/reject/selectattr/rejectattr.
Result<Value> SelectLike(Interpreter& in, const Value& v, const CallArgs& a, bool with_attr, bool keep) {
  FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  size_t test_at = with_attr ? 1 : 0;
  std::string attr;
  if (with_attr) {
    if (a.positional.empty()) return InvalidArgument("missing attribute argument");
    attr = a.positional[0].ToString();
  }
  bool has_test = a.positional.size() > test_at;
  std::string test = has_test ? a.positional[test_at].ToString() : "";
  CallArgs test_args;
  for (size_t i = test_at + 1; i < a.positional.size(); ++i) test_args.positional.push_back(a.positional[i]);
  std::vector<Value> out;
  for (const Value& item : items) {
    Value probe = item;
    if (with_attr) {
      FAK_ASSIGN_OR_RETURN(probe, LookupPath(item, attr));
    }
    bool pass = probe.Truthy();
    if (has_test) {
      FAK_ASSIGN_OR_RETURN(pass, in.ApplyTest(test, probe, test_args));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

Result<Value> Map(Interpreter& in, const Value& v, const CallArgs& a) {
  FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::vector<Value> out;
  if (const Value* attr = a.Get(CallArgs::kKeywordOnly, "attribute")) {
    const Value* dflt = a.Get(CallArgs::kKeywordOnly, "default");
    for (const Value& item : items) {
      FAK_ASSIGN_OR_RETURN(Value x,
                           attr->is_int() ? GetItem(item, *attr) : LookupPath(item, attr->ToString()));
      if (x.is_undefined() && dflt) x = *dflt;
      out.push_back(std::move(x));
    }
    return Value::MakeList(std::move(out));
  }
  if (a.positional.empty()) return InvalidArgument("map requires a filter name or attribute=");
  std::string filter = a.positional[0].ToString();
  CallArgs fa;
  fa.positional.assign(a.positional.begin() + 1, a.positional.end());
  fa.keyword = a.keyword;
  for (const Value& item : items) {
    FAK_ASSIGN_OR_RETURN(Value x, in.ApplyFilter(filter, item, fa));
    out.push_back(std::move(x));
  }
  return Value::MakeList(std::move(out));
}

Result<Value> MinMax(const Value& v, const CallArgs& a, bool want_max) {
  FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty()) return Value::Undefined(fmt::format("No aggregated item, sequence was empty."));
  bool cs = Flag(a, 0, "case_sensitive");
  size_t best = 0;
  FAK_ASSIGN_OR_RETURN(Value best_key, AttributeOf(items[0], a, 1));
  best_key = SortKey(best_key, cs);
  for (size_t i = 1; i < items.size(); ++i) {
    FAK_ASSIGN_OR_RETURN(Value k, AttributeOf(items[i], a, 1));
    k = SortKey(k, cs);
    FAK_ASSIGN_OR_RETURN(bool better, want_max ? Less(best_key, k) : Less(k, best_key));
    if (better) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

}  // namespace

Result<Value> CallFilter(Interpreter& in, std::string_view name, const Value& v, const CallArgs& a) {
  const std::string s = v.is_string() ? v.str() : std::string();
  auto text = [&]() { return v.is_string() ? v.str() : v.ToString(); };
  if (name == "default" || name == "d") {
    const Value* dflt = a.Get(0, "default_value");
    bool boolean = Flag(a, 1, "boolean");
    if (v.is_undefined() || (boolean && !v.Truthy())) return dflt ? *dflt : Value("");
    return v;
  }
  if (name == "length" || name == "count") {
    FAK_ASSIGN_OR_RETURN(int64_t n, Len(v));
    return Value(n);
  }
  if (name == "trim") {
    const Value* chars = a.Get(0, "chars");
    std::optional<std::string> c;
    if (chars && !chars->is_none()) c = chars->ToString();
    return Value(PyStrip(text(), c, true, true));
  }
  if (name == "tojson") return ToJsonFilter(v, a);
  if (name == "upper") return Value(PyUpper(text()));
  if (name == "lower") return Value(PyLower(text()));
  if (name == "capitalize") return Value(PyCapitalize(text()));
  if (name == "title") {
    // jinja2 capitalizes the start of every piece split at runs of whitespace, '-', '(', '{', '[', '<'.
    std::string out;
    bool start = true;
    for (uint32_t cp : DecodeUtf8(text())) {
      bool sep = IsPySpace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
      std::string one;
      AppendUtf8(one, cp);
      out += sep ? one : (start ? PyUpper(one) : PyLower(one));
      start = sep;
    }
    return Value(std::move(out));
  }
  if (name == "string") return Value(text());
  if (name == "safe") return v.is_string() ? v : Value(text());
  if (name == "escape" || name == "e" || name == "forceescape") return Value(HtmlEscape(text()));
  if (name == "int") {
    const Value* d = a.Get(0, "default");
    return ToInt(v, d ? *d : Value(0));
  }
  if (name == "float") {
    const Value* d = a.Get(0, "default");
    return ToFloat(v, d ? *d : Value(0.0));
  }
  if (name == "abs") {
    if (!v.is_number()) return InvalidArgument("bad operand type for abs(): '{}'", v.TypeName());
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    if (v.as_int() == INT64_MIN) return OutOfRange("integer overflow in abs");
    return Value(static_cast<int64_t>(std::llabs(v.as_int())));
  }
  if (name == "round") return Round(v, a);
  if (name == "replace") {
    const Value* old = a.Get(0, "old");
    const Value* repl = a.Get(1, "new");
    if (!old || !repl) return InvalidArgument("replace needs old and new strings");
    const Value* count = a.Get(2, "count");
    return Value(PyReplace(text(), old->ToString(), repl->ToString(),
                           count && !count->is_none() ? count->as_int() : -1));
  }
  if (name == "join") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    const Value* sep = a.Get(0, "d");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i && sep) out += sep->ToString();
      FAK_ASSIGN_OR_RETURN(Value x, AttributeOf(items[i], a, 1));
      out += x.ToString();
      FAK_RETURN_IF_ERROR(in.CheckSize(out.size()));
    }
    return Value(std::move(out));
  }
  if (name == "first" || name == "last") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    if (items.empty()) return Value::Undefined(fmt::format("No {} item, sequence was empty.", name));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    return Value::MakeList(std::move(items));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::vector<uint32_t> cps = DecodeUtf8(s);
      std::reverse(cps.begin(), cps.end());
      return Value(EncodeUtf8(cps));
    }
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::MakeList({});
    if (!v.is_dict()) return InvalidArgument("Can only get item pairs from a mapping.");
    std::vector<Value> out;
    for (const auto& [k, x] : v.dict().items) out.push_back(Value::MakeList({Value(k), x}, true));
    return Value::MakeList(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) return InvalidArgument("dictsort: expected a mapping, got {}", v.TypeName());
    bool cs = Flag(a, 0, "case_sensitive");
    const Value* by = a.Get(1, "by");
    bool by_value = by && by->ToString() == "value";
    std::vector<Value> items, keys;
    for (const auto& [k, x] : v.dict().items) {
      items.push_back(Value::MakeList({Value(k), x}, true));
      keys.push_back(SortKey(by_value ? x : Value(k), cs));
    }
    FAK_RETURN_IF_ERROR(SortValues(items, keys, Flag(a, 2, "reverse")));
    return Value::MakeList(std::move(items));
  }
  if (name == "sort") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    bool cs = Flag(a, 1, "case_sensitive");
    std::vector<Value> keys;
    for (const Value& item : items) {
      FAK_ASSIGN_OR_RETURN(Value k, AttributeOf(item, a, 2));
      keys.push_back(SortKey(k, cs));
    }
    FAK_RETURN_IF_ERROR(SortValues(items, keys, Flag(a, 0, "reverse")));
    return Value::MakeList(std::move(items));
  }
  if (name == "unique") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    bool cs = Flag(a, 0, "case_sensitive");
    std::vector<Value> out, seen;
    for (const Value& item : items) {
      FAK_ASSIGN_OR_RETURN(Value k, AttributeOf(item, a, 1));
      k = SortKey(k, cs);
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& x) { return Equals(x, k); })) continue;
      seen.push_back(k);
      out.push_back(item);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "min" || name == "max") return MinMax(v, a, name == "max");
  if (name == "sum") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    const Value* start = a.Get(1, "start");
    Value total = start ? *start : Value(0);
    for (const Value& item : items) {
      FAK_ASSIGN_OR_RETURN(Value x, AttributeOf(item, a, 0));
      if (!x.is_number() || !total.is_number()) return InvalidArgument("sum: cannot add {}", x.TypeName());
      if (x.is_float() || total.is_float()) {
        total = Value(total.as_double() + x.as_double());
      } else {
        int64_t r;
        if (__builtin_add_overflow(total.as_int(), x.as_int(), &r))
          return OutOfRange("integer overflow in sum");
        total = Value(r);
      }
    }
    return total;
  }
  if (name == "map") return Map(in, v, a);
  if (name == "select") return SelectLike(in, v, a, false, true);
  if (name == "reject") return SelectLike(in, v, a, false, false);
  if (name == "selectattr") return SelectLike(in, v, a, true, true);
  if (name == "rejectattr") return SelectLike(in, v, a, true, false);
  if (name == "attr") {
    const Value* n = a.Get(0, "name");
    if (!n) return InvalidArgument("attr needs a name");
    if (v.is_dict() && !v.dict().is_namespace) {
      return Value::Undefined(fmt::format("'dict object' has no attribute '{}'", n->ToString()));
    }
    return GetAttr(v, n->ToString());
  }
  if (name == "batch") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    const Value* count = a.Get(0, "linecount");
    if (!count || count->as_int() <= 0) return InvalidArgument("batch needs a positive line count");
    const Value* fill = a.Get(1, "fill_with");
    std::vector<Value> out, row;
    for (const Value& item : items) {
      row.push_back(item);
      if (static_cast<int64_t>(row.size()) == count->as_int()) {
        out.push_back(Value::MakeList(std::move(row)));
        row.clear();
      }
    }
    if (!row.empty()) {
      while (fill && !fill->is_none() && static_cast<int64_t>(row.size()) < count->as_int())
        row.push_back(*fill);
      out.push_back(Value::MakeList(std::move(row)));
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "indent") return Indent(v, a);
  if (name == "center") {
    const Value* w = a.Get(0, "width");
    int64_t width = w ? w->as_int() : 80;
    std::string t = text();
    int64_t n = static_cast<int64_t>(CodepointCount(t));
    if (width <= n) return Value(t);
    int64_t pad = width - n;
    int64_t left = pad / 2 + (pad & width & 1);  // CPython's split of odd padding
    FAK_RETURN_IF_ERROR(in.CheckSize(static_cast<size_t>(width)));
    return Value(std::string(left, ' ') + t + std::string(pad - left, ' '));
  }
  if (name == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (uint32_t cp : DecodeUtf8(text())) {
      bool w =
          cp == '_' || (cp >= '0' && cp <= '9') || ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') || cp >= 0x80;
      if (w && !in_word) ++words;
      in_word = w;
    }
    return Value(words);
  }
  return NotFound("no filter named '{}'", name);
}

}  // namespace fak::jinja
