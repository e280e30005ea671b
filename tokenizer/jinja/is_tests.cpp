// jinja2's tests (`x is defined`, `x is string`, ...) and the `in` operator.
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/py_string.h"

namespace fak::jinja {

Result<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined: return false;
    case Kind::kString:
      if (!item.is_string()) {
        return InvalidArgument("'in <string>' requires string as left operand, not {}", item.TypeName());
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
      for (const Value& v : container.list().items) {
        if (Equals(v, item)) return true;
      }
      return false;
    case Kind::kDict:
      if (container.dict().is_namespace) break;
      return item.is_string() && container.dict().Find(item.str()) != nullptr;
    default: break;
  }
  return InvalidArgument("argument of type '{}' is not iterable", container.TypeName());
}

Result<bool> CallTest(Interpreter& in, std::string_view name, const Value& v, const CallArgs& a) {
  const Value* arg = a.Get(0, "other");
  auto need_arg = [&]() -> Status {
    if (!arg) return InvalidArgument("test '{}' needs an argument", name);
    return Status::Ok();
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.dict().is_namespace;
  if (name == "iterable")
    return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.dict().is_namespace);
  if (name == "sequence")
    return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.dict().is_namespace);
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    std::string lo = PyLower(v.str()), up = PyUpper(v.str());
    return name == "lower" ? (lo == v.str() && up != v.str()) : (up == v.str() && lo != v.str());
  }
  if (name == "even" || name == "odd") {
    if (!v.is_int() && !v.is_bool())
      return InvalidArgument("test '{}' needs an integer, got {}", name, v.TypeName());
    int64_t r = v.as_int() % 2;
    return name == "even" ? r == 0 : r != 0;
  }
  if (name == "divisibleby") {
    const Value* n = a.Get(0, "num");
    if (!n || !n->is_number() || !v.is_number()) return InvalidArgument("divisibleby needs two numbers");
    if (n->as_double() == 0) return InvalidArgument("integer division or modulo by zero");
    if (v.is_float() || n->is_float()) return std::fmod(v.as_double(), n->as_double()) == 0;
    return v.as_int() % n->as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") {
    FAK_RETURN_IF_ERROR(need_arg());
    return Equals(v, *arg);
  }
  if (name == "ne" || name == "!=") {
    FAK_RETURN_IF_ERROR(need_arg());
    return !Equals(v, *arg);
  }
  if (name == "lt" || name == "lessthan" || name == "<") {
    FAK_RETURN_IF_ERROR(need_arg());
    return Less(v, *arg);
  }
  if (name == "gt" || name == "greaterthan" || name == ">") {
    FAK_RETURN_IF_ERROR(need_arg());
    return Less(*arg, v);
  }
  if (name == "le" || name == "<=") {
    FAK_RETURN_IF_ERROR(need_arg());
    FAK_ASSIGN_OR_RETURN(bool gt, Less(*arg, v));
    return !gt;
  }
  if (name == "ge" || name == ">=") {
    FAK_RETURN_IF_ERROR(need_arg());
    FAK_ASSIGN_OR_RETURN(bool lt, Less(v, *arg));
    return !lt;
  }
  if (name == "in") {
    const Value* seq = a.Get(0, "seq");
    if (!seq) return InvalidArgument("test 'in' needs a container");
    return Contains(*seq, v);
  }
  if (name == "sameas") {
    FAK_RETURN_IF_ERROR(need_arg());
    if (v.kind() != arg->kind()) return false;
    switch (v.kind()) {
      case Kind::kNone: return true;
      case Kind::kBool: return v.as_bool() == arg->as_bool();
      case Kind::kList: return &v.list() == &arg->list();
      case Kind::kDict: return &v.dict() == &arg->dict();
      case Kind::kCallable: return &v.callable() == &arg->callable();
      default: return Equals(v, *arg);
    }
  }
  (void)in;
  return NotFound("no test named '{}'", name);
}

}  // namespace fak::jinja
