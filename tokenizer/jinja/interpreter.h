// Tree-walking renderer. Scoping follows jinja2: each loop iteration and each macro call gets a fresh
// scope (a `set` inside a loop is gone after the iteration; namespace() is how templates carry state
// out), `if` blocks share their enclosing scope, and the render's variables shadow the globals.
// Hostile templates are bounded: loop iterations, call depth and output size have limits that end
// the render with an error instead of hanging or exhausting memory.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace fak::jinja {

struct RenderLimits {
  size_t max_output_bytes = 64u << 20;    // the rendered text and any string built on the way
  int64_t max_loop_iterations = 1000000;  // summed over all loops (and range() sizes) of one render
  int max_call_depth = 64;                // nested macro calls
};

struct RenderOptions {
  RenderLimits limits;
  std::optional<std::time_t> now;  // strftime_now() time; the current time when unset
};

// One frame of variables; lookups walk to the parent.
class Scope {
 public:
  explicit Scope(const Scope* parent) : parent_(parent) {}
  const Value* Lookup(std::string_view name) const;
  void Set(std::string name, Value value);

 private:
  const Scope* parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

class Interpreter {
 public:
  explicit Interpreter(RenderOptions options) : opt_(std::move(options)) {}
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // `context` is a dict of top-level variables (messages, add_generation_prompt, ...).
  Result<std::string> Render(const Template& t, const Value& context);

  // Used by built-ins (map, select, macros as arguments).
  Result<Value> CallValue(const Value& callee, const CallArgs& args);
  Result<Value> ApplyFilter(std::string_view name, const Value& input, const CallArgs& args);
  Result<bool> ApplyTest(std::string_view name, const Value& input, const CallArgs& args);
  // Counts iterations against the limit; an error once it is exceeded.
  Status CountIterations(int64_t n);
  Status CheckSize(size_t bytes) const;
  const RenderOptions& options() const { return opt_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Status Exec(const Body& body, Scope& scope, std::string& out);
  Status ExecNode(const Node& n, Scope& scope, std::string& out);
  Status ExecFor(const Node& n, Scope& scope, std::string& out);
  Status ExecSet(const Node& n, Scope& scope);
  Status Append(std::string& out, std::string_view s) const;
  Status Assign(const Node& n, const std::vector<std::string>& targets, bool tuple, const Value& v,
                Scope& scope) const;

  Result<Value> Eval(const Expr& e, Scope& scope);
  Result<Value> EvalImpl(const Expr& e, Scope& scope);
  Result<Value> EvalBinary(const Expr& e, const Value& a, const Value& b);
  Result<Value> EvalCompare(const Expr& e, Scope& scope);
  Result<Value> EvalFilter(const Expr& e, Scope& scope, const Value* piped);
  Result<CallArgs> EvalArgs(const Expr& e, size_t first, Scope& scope);
  Result<Value> CallMacro(const Node& macro, const CallArgs& args, const Value* caller);

  RenderOptions opt_;
  Scope* root_ = nullptr;
  Flow flow_ = Flow::kNormal;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
};

// Prefixes "template:LINE:COL: " to a message that has no position yet.
Status AtNode(const Status& s, int line, int col);

// Python-style iteration: a list's items, a dict's keys, a string's characters; undefined is empty.
Result<std::vector<Value>> Iterate(const Value& v);

}  // namespace fak::jinja
