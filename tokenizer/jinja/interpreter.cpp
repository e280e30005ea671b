#include "tokenizer/jinja/interpreter.h"

#include <cmath>

#include "tokenizer/jinja/builtins.h"   // CallFilter, CallTest, GetAttr, GetItem, Contains, AddGlobals
#include "tokenizer/jinja/lexer.h"      // Where
#include "tokenizer/jinja/py_string.h"  // DecodeUtf8, SliceIndices

namespace fak::jinja {

const Value* Scope::Lookup(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent_) {
    for (const auto& [k, v] : s->vars_) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::Set(std::string name, Value value) {
  for (auto& [k, v] : vars_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(std::move(name), std::move(value));
}

Result<std::vector<Value>> Iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return std::vector<Value>{};
    case Kind::kList:
      return v.list().items;
    case Kind::kDict: {
      if (v.dict().is_namespace) break;
      std::vector<Value> keys;
      keys.reserve(v.dict().items.size());
      for (const auto& kv : v.dict().items) keys.emplace_back(kv.first);
      return keys;
    }
    case Kind::kString: {
      std::vector<Value> chars;
      for (uint32_t cp : DecodeUtf8(v.str())) {
        std::string c;
        AppendUtf8(c, cp);
        chars.emplace_back(std::move(c));
      }
      return chars;
    }
    default:
      break;
  }
  return InvalidArgument("'{}' object is not iterable", v.TypeName());
}

static bool HasWhere(const Status& s) { return s.message().rfind("template:", 0) == 0; }

static Status AtNode(const Status& s, int line, int col) {
  if (HasWhere(s)) return s;
  return Status(s.code(), Where(line, col) + s.message());
}

Status Interpreter::CountIterations(int64_t n) {
  iterations_ += n;
  if (iterations_ > opt_.limits.max_loop_iterations) {
    return OutOfRange("loops ran more than {} iterations; the template does not terminate in reasonable time",
                      opt_.limits.max_loop_iterations);
  }
  return Status::Ok();
}

Status Interpreter::CheckSize(size_t bytes) const {
  if (bytes > opt_.limits.max_output_bytes) {
    return OutOfRange("rendered text exceeds the limit of {} bytes", opt_.limits.max_output_bytes);
  }
  return Status::Ok();
}

Status Interpreter::Append(std::string& out, std::string_view s) const {
  FAK_RETURN_IF_ERROR(CheckSize(out.size() + s.size()));
  out += s;
  return Status::Ok();
}

Result<std::string> Interpreter::Render(const Template& t, const Value& context) {
  Scope globals(nullptr);
  AddGlobals(globals);
  Scope root(&globals);
  if (context.is_dict()) {
    for (const auto& [k, v] : context.dict().items) root.Set(k, v);
  } else if (!context.is_undefined() && !context.is_none()) {
    return InvalidArgument("render context must be a dict of variables, got {}", context.TypeName());
  }
  root_ = &root;
  flow_ = Flow::kNormal;
  iterations_ = 0;
  call_depth_ = 0;
  std::string out;
  Status s = Exec(t.body, root, out);
  root_ = nullptr;
  if (!s.ok()) return s;
  return out;
}

Status Interpreter::Exec(const Body& body, Scope& scope, std::string& out) {
  for (const auto& n : body) {
    FAK_RETURN_IF_ERROR(ExecNode(*n, scope, out));
    if (flow_ != Flow::kNormal) return Status::Ok();
  }
  return Status::Ok();
}

Status Interpreter::ExecNode(const Node& n, Scope& scope, std::string& out) {
  switch (n.kind) {
    case NodeKind::kText:
      return Append(out, n.text);
    case NodeKind::kOutput: {
      FAK_ASSIGN_OR_RETURN(Value v, Eval(*n.expr, scope));
      if (v.is_string()) return Append(out, v.str());
      return Append(out, v.ToString());
    }
    case NodeKind::kIf:
      for (size_t i = 0; i < n.conditions.size(); ++i) {
        FAK_ASSIGN_OR_RETURN(Value c, Eval(*n.conditions[i], scope));
        if (c.Truthy()) return Exec(n.bodies[i], scope, out);
      }
      if (n.bodies.size() > n.conditions.size()) return Exec(n.bodies.back(), scope, out);
      return Status::Ok();
    case NodeKind::kFor:
      return ExecFor(n, scope, out);
    case NodeKind::kSet:
      return ExecSet(n, scope);
    case NodeKind::kMacro: {
      const Node* node = &n;
      auto c = std::make_shared<Callable>();
      c->name = n.text;
      c->is_macro = true;
      c->fn = [node](Interpreter& in, const CallArgs& args) { return in.CallMacro(*node, args, nullptr); };
      scope.Set(n.text, Value(std::move(c)));
      return Status::Ok();
    }
    case NodeKind::kCallBlock: {
      // caller(...) renders the block body with the call block's parameters.
      // `alive` guards against a caller() kept past the block (stored in a namespace): the scope it
      // points to is gone then.
      const Node* node = &n;
      Scope* defining = &scope;
      auto alive = std::make_shared<bool>(true);
      auto c = std::make_shared<Callable>();
      c->name = "caller";
      c->is_macro = true;
      c->fn = [node, defining, alive](Interpreter& in, const CallArgs& args) -> Result<Value> {
        if (!*alive) return InvalidArgument("caller() used after its call block ended");
        Scope local(defining);
        for (size_t i = 0; i < node->params.size(); ++i) {
          const Value* v = args.Get(i, node->params[i].name);
          if (v) {
            local.Set(node->params[i].name, *v);
          } else if (node->params[i].default_value) {
            FAK_ASSIGN_OR_RETURN(Value d, in.Eval(*node->params[i].default_value, local));
            local.Set(node->params[i].name, d);
          }
        }
        std::string body;
        FAK_RETURN_IF_ERROR(in.Exec(node->bodies[0], local, body));
        in.flow_ = Flow::kNormal;
        return Value(std::move(body));
      };
      const Expr& call = *n.expr;
      FAK_ASSIGN_OR_RETURN(Value callee, Eval(*call.children[0], scope));
      FAK_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call, 1, scope));
      args.keyword.emplace_back("caller", Value(std::move(c)));
      Result<Value> r = CallValue(callee, args);
      *alive = false;
      if (!r.ok()) return AtNode(r.status(), n.line, n.col);
      return Append(out, r->ToString());
    }
    case NodeKind::kFilterBlock: {
      Scope local(&scope);
      std::string body;
      FAK_RETURN_IF_ERROR(Exec(n.bodies[0], local, body));
      Value text(std::move(body));
      FAK_ASSIGN_OR_RETURN(Value v, EvalFilter(*n.filter, scope, &text));
      return Append(out, v.ToString());
    }
    case NodeKind::kBreak:
      flow_ = Flow::kBreak;
      return Status::Ok();
    case NodeKind::kContinue:
      flow_ = Flow::kContinue;
      return Status::Ok();
    case NodeKind::kScope: {
      Scope local(&scope);
      return Exec(n.bodies[0], local, out);
    }
  }
  return Status::Ok();
}

Status Interpreter::Assign(const Node& n, const std::vector<std::string>& targets, bool tuple, const Value& v,
                           Scope& scope) const {
  if (!tuple) {
    scope.Set(targets[0], v);
    return Status::Ok();
  }
  Result<std::vector<Value>> items = Iterate(v);
  if (!items.ok()) return AtNode(InvalidArgument("cannot unpack {}", v.TypeName()), n.line, n.col);
  if (items->size() != targets.size()) {
    return InvalidArgument("{}cannot unpack {} values into {} names", Where(n.line, n.col), items->size(),
                           targets.size());
  }
  for (size_t i = 0; i < targets.size(); ++i) scope.Set(targets[i], (*items)[i]);
  return Status::Ok();
}

Status Interpreter::ExecFor(const Node& n, Scope& scope, std::string& out) {
  FAK_ASSIGN_OR_RETURN(Value iterable, Eval(*n.expr, scope));
  Result<std::vector<Value>> all = Iterate(iterable);
  if (!all.ok()) return AtNode(all.status(), n.expr->line, n.expr->col);
  std::vector<Value> items = std::move(all).value();
  if (n.filter) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      FAK_RETURN_IF_ERROR(AtNode(CountIterations(1), n.line, n.col));
      Scope probe(&scope);
      FAK_RETURN_IF_ERROR(Assign(n, n.targets, n.target_is_tuple, item, probe));
      FAK_ASSIGN_OR_RETURN(Value keep, Eval(*n.filter, probe));
      if (keep.Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    Scope local(&scope);
    return Exec(n.bodies[1], local, out);
  }
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    FAK_RETURN_IF_ERROR(AtNode(CountIterations(1), n.line, n.col));
    Scope local(&scope);
    FAK_RETURN_IF_ERROR(Assign(n, n.targets, n.target_is_tuple, items[i], local));
    Value loop = Value::MakeDict();
    Dict& d = loop.dict();
    d.items.reserve(12);
    d.items.emplace_back("index", Value(i + 1));
    d.items.emplace_back("index0", Value(i));
    d.items.emplace_back("revindex", Value(length - i));
    d.items.emplace_back("revindex0", Value(length - i - 1));
    d.items.emplace_back("first", Value(i == 0));
    d.items.emplace_back("last", Value(i == length - 1));
    d.items.emplace_back("length", Value(length));
    d.items.emplace_back("depth", Value(1));
    d.items.emplace_back("depth0", Value(0));
    d.items.emplace_back("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
    d.items.emplace_back("nextitem", i + 1 < length ? items[i + 1] : Value::Undefined("there is no next item"));
    d.items.emplace_back("cycle", Value::MakeFunction("cycle", [i](Interpreter&, const CallArgs& a) -> Result<Value> {
      if (a.positional.empty()) return InvalidArgument("no items for cycling given");
      return a.positional[static_cast<size_t>(i) % a.positional.size()];
    }));
    local.Set("loop", std::move(loop));
    FAK_RETURN_IF_ERROR(Exec(n.bodies[0], local, out));
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  return Status::Ok();
}

Status Interpreter::ExecSet(const Node& n, Scope& scope) {
  Value v;
  if (n.expr) {
    FAK_ASSIGN_OR_RETURN(v, Eval(*n.expr, scope));
  } else {
    Scope local(&scope);
    std::string body;
    FAK_RETURN_IF_ERROR(Exec(n.bodies[0], local, body));
    v = Value(std::move(body));
    if (n.filter) {
      FAK_ASSIGN_OR_RETURN(v, EvalFilter(*n.filter, scope, &v));
    }
  }
  if (!n.text.empty()) {  // set ns.attr = v
    const Value* target = scope.Lookup(n.targets[0]);
    if (!target || !target->is_dict() || !target->dict().is_namespace) {
      return InvalidArgument("{}cannot assign attribute on non-namespace object '{}'", Where(n.line, n.col),
                             n.targets[0]);
    }
    target->dict().Set(n.text, std::move(v));
    return Status::Ok();
  }
  return Assign(n, n.targets, n.target_is_tuple, v, scope);
}

Result<Value> Interpreter::CallMacro(const Node& m, const CallArgs& args, const Value* caller) {
  if (call_depth_ >= opt_.limits.max_call_depth) {
    return OutOfRange("macro '{}' nests deeper than {} calls", m.text, opt_.limits.max_call_depth);
  }
  if (args.positional.size() > m.params.size()) {
    return InvalidArgument("macro '{}' takes not more than {} argument(s)", m.text, m.params.size());
  }
  Scope local(root_);
  const Value* caller_kw = caller;
  for (const auto& [k, v] : args.keyword) {
    if (k == "caller") {
      caller_kw = &v;
      continue;
    }
    bool known = false;
    for (const auto& p : m.params) known = known || p.name == k;
    if (!known) return InvalidArgument("macro '{}' was invoked with unknown keyword argument '{}'", m.text, k);
  }
  for (size_t i = 0; i < m.params.size(); ++i) {
    const MacroParam& p = m.params[i];
    const Value* v = nullptr;
    for (const auto& [k, kv] : args.keyword) {
      if (k == p.name) v = &kv;
    }
    if (!v && i < args.positional.size()) v = &args.positional[i];
    if (v) {
      local.Set(p.name, *v);
    } else if (p.default_value) {
      FAK_ASSIGN_OR_RETURN(Value d, Eval(*p.default_value, local));
      local.Set(p.name, d);
    } else {
      local.Set(p.name, Value::Undefined(fmt::format("parameter '{}' was not provided", p.name)));
    }
  }
  if (caller_kw) local.Set("caller", *caller_kw);
  ++call_depth_;
  std::string out;
  Status s = Exec(m.bodies[0], local, out);
  --call_depth_;
  flow_ = Flow::kNormal;
  FAK_RETURN_IF_ERROR(s);
  return Value(std::move(out));
}

Result<Value> Interpreter::CallValue(const Value& callee, const CallArgs& args) {
  if (callee.is_undefined()) {
    std::string hint = callee.undefined_hint();
    return InvalidArgument("{}", hint.empty() ? "call of an undefined value" : hint);
  }
  if (!callee.is_callable()) return InvalidArgument("'{}' object is not callable", callee.TypeName());
  return callee.callable().fn(*this, args);
}

Result<Value> Interpreter::ApplyFilter(std::string_view name, const Value& input, const CallArgs& args) {
  return CallFilter(*this, name, input, args);
}

Result<bool> Interpreter::ApplyTest(std::string_view name, const Value& input, const CallArgs& args) {
  return CallTest(*this, name, input, args);
}

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
    case ExprKind::kLiteral:
      return e.value;
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
    case ExprKind::kFilter:
      return EvalFilter(e, scope, nullptr);
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
    case ExprKind::kCompare:
      return EvalCompare(e, scope);
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
    return InvalidArgument("unsupported operand type(s) for {}: '{}' and '{}'", op, a.TypeName(), b.TypeName());
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
    for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq.list().items.begin(), seq.list().items.end());
    return Value::MakeList(std::move(items), seq.list().is_tuple);
  }
  if (!a.is_number() || !b.is_number()) {
    if (op == "%" && a.is_string()) return Unsupported("printf-style string formatting with '%' is not supported");
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
