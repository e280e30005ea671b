// Values of the template language: the JSON-like data a chat template sees (none, bool, int, float,
// string, list, dict) plus callables (macros, built-in functions, bound methods) and namespaces.
// Semantics follow Python, because chat templates are written for Python's jinja2: truthiness,
// equality (1 == 1.0 == true), str() and repr() spellings, insertion-ordered dicts.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace fak::jinja {

class Value;
class Interpreter;

enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

struct List {
  std::vector<Value> items;
  bool is_tuple = false;  // prints as (a, b)
};

// Insertion-ordered string-keyed map, like a Python dict built from JSON.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // namespace(): the one object whose attributes `set` may assign

  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  static constexpr size_t kKeywordOnly = SIZE_MAX;
  // Looks up a keyword argument, or the positional one at `index`; nullptr when absent.
  const Value* Get(size_t index, std::string_view name) const;
};

using NativeFn = std::function<Result<Value>(Interpreter&, const CallArgs&)>;

struct Callable {
  std::string name;
  NativeFn fn;
  bool is_macro = false;
};

class Value {
 public:
  Value() = default;  // undefined
  // An undefined value that remembers why ("'x' is undefined"), for the error raised when it is used.
  static Value Undefined(std::string hint);
  static Value None() { return Value(Kind::kNone); }
  Value(bool b) : kind_(Kind::kBool), i_(b) {}     // NOLINT(google-explicit-constructor)
  Value(int v) : kind_(Kind::kInt), i_(v) {}       // NOLINT(google-explicit-constructor)
  Value(int64_t v) : kind_(Kind::kInt), i_(v) {}   // NOLINT(google-explicit-constructor)
  Value(double v) : kind_(Kind::kFloat), f_(v) {}  // NOLINT(google-explicit-constructor)
  Value(std::string s)                             // NOLINT(google-explicit-constructor)
      : kind_(Kind::kString), s_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  Value(std::shared_ptr<List> l) : kind_(Kind::kList), list_(std::move(l)) {}        // NOLINT
  Value(std::shared_ptr<Dict> d) : kind_(Kind::kDict), dict_(std::move(d)) {}        // NOLINT
  Value(std::shared_ptr<Callable> c) : kind_(Kind::kCallable), fn_(std::move(c)) {}  // NOLINT

  static Value MakeList(std::vector<Value> items, bool is_tuple = false);
  static Value MakeDict();
  static Value MakeFunction(std::string name, NativeFn fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return kind_ == Kind::kFloat ? static_cast<int64_t>(f_) : i_; }
  double as_double() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  const std::string& str() const { return *s_; }
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }
  const Callable& callable() const { return *fn_; }
  // The reason an undefined value is undefined; empty when unknown.
  std::string undefined_hint() const { return kind_ == Kind::kUndefined && s_ ? *s_ : std::string(); }

  // Python truthiness: undefined, none, false, 0, "", [] and {} are false.
  bool Truthy() const;
  // Python str(): what `{{ x }}` prints. Undefined prints as "".
  std::string ToString() const;
  // Python repr(): how values print inside containers.
  std::string Repr() const;
  // Python's type name, for error messages ("'int' object has no attribute 'strip'").
  const char* TypeName() const;

 private:
  explicit Value(Kind k) : kind_(k) {}

  Kind kind_ = Kind::kUndefined;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;  // the string, or an undefined value's hint
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> fn_;
};

// Python ==, with 1 == 1.0 == True; containers compare element-wise.
bool Equals(const Value& a, const Value& b);
// Python <: numbers with numbers, strings with strings, lists lexicographically. Other pairs fail.
Result<bool> Less(const Value& a, const Value& b);

// Python repr() of a float: the shortest text that reads back to the same double ("0.1", "1e+16").
std::string FloatRepr(double v);
// Python repr() of a string: single quotes unless the text holds ' and no ".
std::string StringRepr(std::string_view s);

// json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys) with Python's default
// separators (", " and ": ", or "," and ": " when indenting). indent < 0 means None.
struct JsonDumpOptions {
  int indent = -1;
  std::string indent_text;  // used instead of spaces when indent is given as a string
  bool sort_keys = false;
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key); unset: Python's defaults
  bool ensure_ascii = false;
};
Result<std::string> ToJson(const Value& v, const JsonDumpOptions& options);

// JSON data to values (objects keep their key order when given ordered_json).
Value FromJson(const nlohmann::ordered_json& j);
Value FromJson(const nlohmann::json& j);

}  // namespace fak::jinja
