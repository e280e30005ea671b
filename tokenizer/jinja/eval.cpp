// Expression evaluation: names, literals, attribute and item access, slices, calls, filters, tests
// and Python's operators (int/float arithmetic with floor division and modulo, overflow checked).
#include <cmath>

#include "tokenizer/jinja/builtins.h"  // CallFilter, CallTest, GetAttr, GetItem, Contains
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/py_string.h"  // DecodeUtf8, SliceIndices

namespace fak::jinja {

Result<CallArgs> Interpreter::EvalArgs(const Expr& e, size_t first, Scope& scope) {
  CallArgs args;
  for (size_t i = first; i < e.children.size(); ++i) {
    FAK_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i], scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [k, x] : e.kwargs) {
    FAK_ASSIGN_OR_RETURN(Value v, Eval(*x, scope));
    args.keyword.emplace_back(k, std::move(v));
  }
  return args;
}

Result<Value> Interpreter::EvalFilter(const Expr& e, Scope& scope, const Value* piped) {
  Value input;
  if (e.children[0]) {
    if (e.children[0]->kind == ExprKind::kFilter) {
      FAK_ASSIGN_OR_RETURN(input, EvalFilter(*e.children[0], scope, piped));
    } else {
      FAK_ASSIGN_OR_RETURN(input, Eval(*e.children[0], scope));
    }
  } else if (piped) {
    input = *piped;
  }
  FAK_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, scope));
  Result<Value> r = CallFilter(*this, e.name, input, args);
  if (!r.ok()) return AtNode(r.status(), e.line, e.col);
  return r;
}

Result<Value> Interpreter::Eval(const Expr& e, Scope& scope) {
  Result<Value> r = EvalImpl(e, scope);
  if (!r.ok()) return AtNode(r.status(), e.line, e.col);
  return r;
}

static Status UndefinedError(const Value& v) {
  std::string hint = v.undefined_hint();
  return InvalidArgument("{}", hint.empty() ? "value is undefined" : hint);
}

Result<Value> Interpreter::EvalImpl(const Expr& e, Scope& scope) {
  switch (e.kind) {
    case ExprKind::kLiteral: return e.value;
    case ExprKind::kName: {
      const Value* v = scope.Lookup(e.name);
      if (!v) return Value::Undefined(fmt::format("'{}' is undefined", e.name));
      return *v;
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.children.size());
      for (const auto& c : e.children) {
        FAK_ASSIGN_OR_RETURN(Value v, Eval(*c, scope));
        items.push_back(std::move(v));
      }
      return Value::MakeList(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      Value d = Value::MakeDict();
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        FAK_ASSIGN_OR_RETURN(Value k, Eval(*e.children[i], scope));
        FAK_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i + 1], scope));
        if (!k.is_string()) return Unsupported("dict keys must be strings, got {}", k.TypeName());
        d.dict().Set(k.str(), std::move(v));
      }
      return d;
    }
    case ExprKind::kGetAttr: {
      FAK_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], scope));
      return GetAttr(obj, e.name);
    }
    case ExprKind::kGetItem: {
      FAK_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], scope));
      FAK_ASSIGN_OR_RETURN(Value key, Eval(*e.children[1], scope));
      return GetItem(obj, key);
    }
    case ExprKind::kSlice: {
      FAK_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], scope));
      std::optional<int64_t> part[3];
      for (int i = 0; i < 3; ++i) {
        if (!e.children[i + 1]) continue;
        FAK_ASSIGN_OR_RETURN(Value p, Eval(*e.children[i + 1], scope));
        if (p.is_none()) continue;
        if (!p.is_int() && !p.is_bool()) return InvalidArgument("slice indices must be integers or None");
        part[i] = p.as_int();
      }
      int64_t step = part[2].value_or(1);
      if (step == 0) return InvalidArgument("slice step cannot be zero");
      if (obj.is_undefined()) return UndefinedError(obj);
      if (obj.is_string()) {
        std::vector<uint32_t> cps = DecodeUtf8(obj.str());
        std::string out;
        for (int64_t i : SliceIndices(static_cast<int64_t>(cps.size()), part[0], part[1], step)) {
          AppendUtf8(out, cps[i]);
        }
        return Value(std::move(out));
      }
      if (obj.is_list()) {
        const auto& items = obj.list().items;
        std::vector<Value> out;
        for (int64_t i : SliceIndices(static_cast<int64_t>(items.size()), part[0], part[1], step)) {
          out.push_back(items[i]);
        }
        return Value::MakeList(std::move(out), obj.list().is_tuple);
      }
      return InvalidArgument("'{}' object is not subscriptable", obj.TypeName());
    }
    case ExprKind::kCall: {
      FAK_ASSIGN_OR_RETURN(Value callee, Eval(*e.children[0], scope));
      FAK_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, scope));
      return CallValue(callee, args);
    }
    case ExprKind::kFilter: return EvalFilter(e, scope, nullptr);
    case ExprKind::kTest: {
      FAK_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], scope));
      FAK_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, scope));
      FAK_ASSIGN_OR_RETURN(bool r, CallTest(*this, e.name, v, args));
      return Value(r != e.negated);
    }
    case ExprKind::kNot: {
      FAK_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], scope));
      return Value(!v.Truthy());
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      FAK_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], scope));
      if (v.is_undefined()) return UndefinedError(v);
      if (!v.is_number()) {
        return InvalidArgument("bad operand type for unary {}: '{}'", e.kind == ExprKind::kNeg ? '-' : '+',
                               v.TypeName());
      }
      if (e.kind == ExprKind::kPos) return v.is_bool() ? Value(v.as_int()) : v;
      if (v.is_float()) return Value(-v.as_double());
      if (v.as_int() == INT64_MIN) return OutOfRange("integer overflow");
      return Value(-v.as_int());
    }
    case ExprKind::kBinary: {
      FAK_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0], scope));
      FAK_ASSIGN_OR_RETURN(Value b, Eval(*e.children[1], scope));
      return EvalBinary(e, a, b);
    }
    case ExprKind::kAnd: {
      FAK_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0], scope));
      if (!a.Truthy()) return a;
      return Eval(*e.children[1], scope);
    }
    case ExprKind::kOr: {
      FAK_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0], scope));
      if (a.Truthy()) return a;
      return Eval(*e.children[1], scope);
    }
    case ExprKind::kCompare: return EvalCompare(e, scope);
    case ExprKind::kCondExpr: {
      FAK_ASSIGN_OR_RETURN(Value c, Eval(*e.children[0], scope));
      if (c.Truthy()) return Eval(*e.children[1], scope);
      if (!e.children[2]) return Value::Undefined("the conditional expression had no else branch");
      return Eval(*e.children[2], scope);
    }
  }
  return Internal("unknown expression kind");
}

Result<Value> Interpreter::EvalCompare(const Expr& e, Scope& scope) {
  FAK_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0], scope));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    FAK_ASSIGN_OR_RETURN(Value right, Eval(*e.children[i + 1], scope));
    const std::string& op = e.ops[i];
    bool r = false;
    if (op == "==") {
      r = Equals(left, right);
    } else if (op == "!=") {
      r = !Equals(left, right);
    } else if (op == "in" || op == "notin") {
      FAK_ASSIGN_OR_RETURN(bool c, Contains(right, left));
      r = (op == "in") == c;
    } else {
      if (left.is_undefined()) return UndefinedError(left);
      if (right.is_undefined()) return UndefinedError(right);
      if (op == "<") {
        FAK_ASSIGN_OR_RETURN(r, Less(left, right));
      } else if (op == ">") {
        FAK_ASSIGN_OR_RETURN(r, Less(right, left));
      } else if (op == "<=") {
        FAK_ASSIGN_OR_RETURN(bool gt, Less(right, left));
        r = !gt;
      } else {
        FAK_ASSIGN_OR_RETURN(bool lt, Less(left, right));
        r = !lt;
      }
    }
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

static double FloorDiv(double a, double b) { return std::floor(a / b); }

Result<Value> Interpreter::EvalBinary(const Expr& e, const Value& a, const Value& b) {
  const std::string& op = e.name;
  if (op == "~") {
    std::string s = a.ToString() + b.ToString();
    FAK_RETURN_IF_ERROR(CheckSize(s.size()));
    return Value(std::move(s));
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  auto type_error = [&]() {
    return InvalidArgument("unsupported operand type(s) for {}: '{}' and '{}'", op, a.TypeName(),
                           b.TypeName());
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      FAK_RETURN_IF_ERROR(CheckSize(a.str().size() + b.str().size()));
      return Value(a.str() + b.str());
    }
    if (a.is_list() && b.is_list()) {
      if (a.list().is_tuple != b.list().is_tuple) return type_error();
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return Value::MakeList(std::move(items), a.list().is_tuple);
    }
  }
  if (op == "*" && (a.is_string() || a.is_list() || b.is_string() || b.is_list())) {
    const Value& seq = (a.is_string() || a.is_list()) ? a : b;
    const Value& count = (a.is_string() || a.is_list()) ? b : a;
    if (!count.is_int() && !count.is_bool()) return type_error();
    int64_t n = std::max<int64_t>(0, count.as_int());
    if (seq.is_string()) {
      if (n > 0 && seq.str().size() > opt_.limits.max_output_bytes / static_cast<uint64_t>(n)) {
        return CheckSize(opt_.limits.max_output_bytes + 1);
      }
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += seq.str();
      return Value(std::move(out));
    }
    FAK_RETURN_IF_ERROR(CountIterations(n * static_cast<int64_t>(seq.list().items.size())));
    std::vector<Value> items;
    for (int64_t i = 0; i < n; ++i)
      items.insert(items.end(), seq.list().items.begin(), seq.list().items.end());
    return Value::MakeList(std::move(items), seq.list().is_tuple);
  }
  if (!a.is_number() || !b.is_number()) {
    if (op == "%" && a.is_string())
      return Unsupported("printf-style string formatting with '%' is not supported");
    return type_error();
  }
  bool use_float = a.is_float() || b.is_float() || op == "/";
  if (op == "**") {
    if (!use_float && b.as_int() >= 0) {
      int64_t base = a.as_int(), result = 1;
      for (int64_t i = 0; i < b.as_int(); ++i) {
        if (__builtin_mul_overflow(result, base, &result)) return OutOfRange("integer overflow in '**'");
        if (result == 0 || result == 1) break;
      }
      return Value(result);
    }
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  if (use_float) {
    double x = a.as_double(), y = b.as_double();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (y == 0 && (op == "/" || op == "//" || op == "%")) return InvalidArgument("division by zero");
    if (op == "/") return Value(x / y);
    if (op == "//") return Value(FloorDiv(x, y));
    if (op == "%") {
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    return type_error();
  }
  int64_t x = a.as_int(), y = b.as_int(), r = 0;
  if (op == "+") {
    if (__builtin_add_overflow(x, y, &r)) return OutOfRange("integer overflow in '+'");
    return Value(r);
  }
  if (op == "-") {
    if (__builtin_sub_overflow(x, y, &r)) return OutOfRange("integer overflow in '-'");
    return Value(r);
  }
  if (op == "*") {
    if (__builtin_mul_overflow(x, y, &r)) return OutOfRange("integer overflow in '*'");
    return Value(r);
  }
  if (y == 0) return InvalidArgument("integer division or modulo by zero");
  if (x == INT64_MIN && y == -1) return OutOfRange("integer overflow in '{}'", op);
  int64_t q = x / y, m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) {
    --q;
    m += y;
  }
  if (op == "//") return Value(q);
  if (op == "%") return Value(m);
  return type_error();
}

}  // namespace fak::jinja
