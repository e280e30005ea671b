#include "tokenizer/jinja/interpreter.h"

#include <algorithm>
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
    case Kind::kUndefined: return std::vector<Value>{};
    case Kind::kList: return v.list().items;
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
    default: break;
  }
  return InvalidArgument("'{}' object is not iterable", v.TypeName());
}

Status AtNode(const Status& s, int line, int col) {
  if (s.message().rfind("template:", 0) == 0) return s;
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
    case NodeKind::kText: return Append(out, n.text);
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
    case NodeKind::kFor: return ExecFor(n, scope, out);
    case NodeKind::kSet: return ExecSet(n, scope);
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
    case NodeKind::kBreak: flow_ = Flow::kBreak; return Status::Ok();
    case NodeKind::kContinue: flow_ = Flow::kContinue; return Status::Ok();
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
    d.items.emplace_back("nextitem",
                         i + 1 < length ? items[i + 1] : Value::Undefined("there is no next item"));
    d.items.emplace_back("cycle",
                         Value::MakeFunction("cycle", [i](Interpreter&, const CallArgs& a) -> Result<Value> {
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

namespace {

// Whether `v` is or holds (through lists and dicts) the dict `target`. Containers are immutable but for
// namespaces, so a reference cycle can only be closed by `set ns.attr = v` with such a v; refusing it
// keeps every value's graph acyclic (shared_ptr-owned cycles would never be freed). `seen` keeps the walk
// linear when containers are shared.
bool Reaches(const Value& v, const Dict* target, std::vector<const void*>& seen) {
  const void* self = v.is_list()   ? static_cast<const void*>(&v.list())
                     : v.is_dict() ? static_cast<const void*>(&v.dict())
                                   : nullptr;
  if (self == nullptr) return false;
  if (self == target) return true;
  if (std::find(seen.begin(), seen.end(), self) != seen.end()) return false;
  seen.push_back(self);
  if (v.is_list()) {
    for (const Value& e : v.list().items) {
      if (Reaches(e, target, seen)) return true;
    }
    return false;
  }
  for (const auto& [k, e] : v.dict().items) {
    if (Reaches(e, target, seen)) return true;
  }
  return false;
}

}  // namespace

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
    std::vector<const void*> seen;
    if (Reaches(v, &target->dict(), seen)) {
      return InvalidArgument("{}cannot assign to '{}.{}' a value that holds '{}' itself (a reference cycle)",
                             Where(n.line, n.col), n.targets[0], n.text, n.targets[0]);
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
    if (!known)
      return InvalidArgument("macro '{}' was invoked with unknown keyword argument '{}'", m.text, k);
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

}  // namespace fak::jinja
