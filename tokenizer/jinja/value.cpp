#include "tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <utf8proc.h>

#include "tokenizer/jinja/py_string.h"  // DecodeUtf8

namespace fak::jinja {

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::Get(size_t index, std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return index < positional.size() ? &positional[index] : nullptr;
}

Value Value::MakeList(std::vector<Value> items, bool is_tuple) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  return Value(std::move(l));
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::MakeDict() { return Value(std::make_shared<Dict>()); }

Value Value::MakeFunction(std::string name, NativeFn fn) {
  auto c = std::make_shared<Callable>();
  c->name = std::move(name);
  c->fn = std::move(fn);
  return Value(std::move(c));
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0;
    case Kind::kString: return !s_->empty();
    case Kind::kList: return !list_->items.empty();
    case Kind::kDict: return dict_->is_namespace || !dict_->items.empty();
    case Kind::kCallable: return true;
  }
  return false;
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return list_->is_tuple ? "tuple" : "list";
    case Kind::kDict: return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::kCallable: return fn_->is_macro ? "Macro" : "builtin_function_or_method";
  }
  return "object";
}

std::string FloatRepr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci looks like "-1.2345e+02": split into sign, digits and exponent.
  bool negative = sci[0] == '-';
  size_t epos = sci.find('e');
  std::string mant = sci.substr(negative ? 1 : 0, epos - (negative ? 1 : 0));
  int exp10 = std::atoi(sci.c_str() + epos + 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int decpt = exp10 + 1;  // digits[0] sits just before the decimal point when decpt == 1
  std::string out = negative ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(-decpt, '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits + std::string(decpt - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    int e = decpt - 1;
    out += fmt::format("e{}{:02d}", e < 0 ? '-' : '+', std::abs(e));
  }
  return out;
}

static bool IsPrintable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7f) return false;
  if (cp < 0x7f) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

std::string StringRepr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (uint32_t cp : DecodeUtf8(s)) {
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (IsPrintable(cp)) {
      AppendUtf8(out, cp);
    } else if (cp < 0x100) {
      out += fmt::format("\\x{:02x}", cp);
    } else if (cp < 0x10000) {
      out += fmt::format("\\u{:04x}", cp);
    } else {
      out += fmt::format("\\U{:08x}", cp);
    }
  }
  out += quote;
  return out;
}

static std::string ContainerString(const Value& v) {
  std::string out;
  if (v.is_list()) {
    const List& l = v.list();
    out += l.is_tuple ? '(' : '[';
    for (size_t i = 0; i < l.items.size(); ++i) {
      if (i) out += ", ";
      out += l.items[i].Repr();
    }
    if (l.is_tuple && l.items.size() == 1) out += ',';
    out += l.is_tuple ? ')' : ']';
    return out;
  }
  const Dict& d = v.dict();
  if (d.is_namespace) out += "<Namespace ";
  out += '{';
  for (size_t i = 0; i < d.items.size(); ++i) {
    if (i) out += ", ";
    out += StringRepr(d.items[i].first) + ": " + d.items[i].second.Repr();
  }
  out += '}';
  if (d.is_namespace) out += '>';
  return out;
}

std::string Value::ToString() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return i_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return FloatRepr(f_);
    case Kind::kString: return *s_;
    case Kind::kList:
    case Kind::kDict: return ContainerString(*this);
    case Kind::kCallable:
      return fn_->is_macro ? fmt::format("<Macro '{}'>", fn_->name)
                           : fmt::format("<built-in function {}>", fn_->name);
  }
  return "";
}

std::string Value::Repr() const {
  if (kind_ == Kind::kString) return StringRepr(*s_);
  if (kind_ == Kind::kUndefined) return "Undefined";
  return ToString();
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.str() == b.str();
    case Kind::kList: {
      const List& x = a.list();
      const List& y = b.list();
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!Equals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.is_namespace || y.is_namespace) return &x == &y;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.Find(k);
        if (!other || !Equals(v, *other)) return false;
      }
      return true;
    }
    case Kind::kCallable: return &a.callable() == &b.callable();
    default: return false;
  }
}

Result<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 keeps code point order
  if (a.is_list() && b.is_list()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return InvalidArgument("'<' not supported between instances of '{}' and '{}'", a.TypeName(), b.TypeName());
}

static void JsonString(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (uint32_t cp : DecodeUtf8(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20) {
          out += fmt::format("\\u{:04x}", cp);
        } else if (ensure_ascii && cp > 0x7e) {
          if (cp >= 0x10000) {
            uint32_t v = cp - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
          } else {
            out += fmt::format("\\u{:04x}", cp);
          }
        } else {
          AppendUtf8(out, cp);
        }
    }
  }
  out += '"';
}

namespace {

struct JsonWriter {
  const JsonDumpOptions& opt;
  std::string item_sep;
  std::string key_sep;
  std::string out;
  int depth = 0;

  void Newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i)
      out += opt.indent_text.empty() ? std::string(opt.indent, ' ') : opt.indent_text;
  }
  bool Indenting() const { return opt.indent >= 0 || !opt.indent_text.empty(); }

  Status Write(const Value& v) {
    if (++depth > 200) return OutOfRange("tojson: value nests deeper than 200 levels");
    Status s = WriteInner(v);
    --depth;
    return s;
  }

  Status WriteInner(const Value& v) {
    switch (v.kind()) {
      case Kind::kNone: out += "null"; return Status::Ok();
      case Kind::kBool: out += v.as_bool() ? "true" : "false"; return Status::Ok();
      case Kind::kInt: out += std::to_string(v.as_int()); return Status::Ok();
      case Kind::kFloat: {
        double f = v.as_double();
        if (std::isnan(f))
          out += "NaN";
        else if (std::isinf(f))
          out += f < 0 ? "-Infinity" : "Infinity";
        else
          out += FloatRepr(f);
        return Status::Ok();
      }
      case Kind::kString: JsonString(out, v.str(), opt.ensure_ascii); return Status::Ok();
      case Kind::kList: {
        const auto& items = v.list().items;
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (Indenting()) Newline(depth);
          FAK_RETURN_IF_ERROR(Write(items[i]));
        }
        if (Indenting() && !items.empty()) Newline(depth - 1);
        out += ']';
        return Status::Ok();
      }
      case Kind::kDict: {
        if (v.dict().is_namespace)
          return InvalidArgument("Object of type Namespace is not JSON serializable");
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& kv : v.dict().items) items.push_back(&kv);
        if (opt.sort_keys) {
          std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        }
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (Indenting()) Newline(depth);
          JsonString(out, items[i]->first, opt.ensure_ascii);
          out += key_sep;
          FAK_RETURN_IF_ERROR(Write(items[i]->second));
        }
        if (Indenting() && !items.empty()) Newline(depth - 1);
        out += '}';
        return Status::Ok();
      }
      default: return InvalidArgument("Object of type {} is not JSON serializable", v.TypeName());
    }
  }
};

}  // namespace

Result<std::string> ToJson(const Value& v, const JsonDumpOptions& options) {
  bool indenting = options.indent >= 0 || !options.indent_text.empty();
  JsonWriter w{options, indenting ? "," : ", ", ": ", {}, 0};
  if (options.separators) {
    w.item_sep = options.separators->first;
    w.key_sep = options.separators->second;
  }
  FAK_RETURN_IF_ERROR(w.Write(v));
  return std::move(w.out);
}

template <typename J>
static Value FromJsonImpl(const J& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::None();
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJsonImpl(e));
      return Value::MakeList(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Value d = Value::MakeDict();
      for (auto it = j.begin(); it != j.end(); ++it)
        d.dict().items.emplace_back(it.key(), FromJsonImpl(it.value()));
      return d;
    }
    default: return Value();
  }
}

Value FromJson(const nlohmann::ordered_json& j) { return FromJsonImpl(j); }
Value FromJson(const nlohmann::json& j) { return FromJsonImpl(j); }

}  // namespace fak::jinja
