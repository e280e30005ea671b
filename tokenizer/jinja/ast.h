// Syntax tree of a parsed template. Plain structs: the parser builds them once, the interpreter walks
// them for every render. Every node keeps its line and column for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace fak::jinja {

enum class ExprKind : uint8_t {
  kLiteral,  // value
  kName,     // name
  kList,     // children
  kTuple,    // children
  kDict,     // children: key0, value0, key1, value1, ...
  kGetAttr,  // children[0].name
  kGetItem,  // children[0][children[1]]
  kSlice,    // children[0][a:b:c]; children[1..3] are start, stop, step (null when omitted)
  kCall,     // children[0](children[1..], kwargs)
  kFilter,   // children[0] | name(children[1..], kwargs)
  kTest,     // children[0] is name(children[1..]); `negated` for "is not"
  kNot,      // not children[0]
  kNeg,      // -children[0]
  kPos,      // +children[0]
  kBinary,   // children[0] op children[1]: + - * / // % ** ~
  kAnd,
  kOr,
  kCompare,   // children[0] ops[0] children[1] ops[1] children[2] ... (chained)
  kCondExpr,  // children[1] if children[0] else children[2] (null: undefined)
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  int col = 0;
  Value value;                   // kLiteral
  std::string name;              // kName, kGetAttr, kFilter, kTest; the operator for kBinary
  std::vector<std::string> ops;  // kCompare: "==", "!=", "<", "<=", ">", ">=", "in", "notin"
  bool negated = false;          // kTest
  std::vector<std::unique_ptr<Expr>> children;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;  // kCall, kFilter, kTest
};
using ExprPtr = std::unique_ptr<Expr>;

enum class NodeKind : uint8_t {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // conditions[i] guards bodies[i]; bodies.back() is the else branch when it has one more
  kFor,          // for targets in expr [if filter]: bodies[0], else: bodies[1]
  kSet,          // set targets = expr; or set targets[0].attr = expr; or block set (bodies[0], filters)
  kMacro,        // macro name(params) bodies[0]
  kCallBlock,    // call(params) expr: bodies[0] is the caller()
  kFilterBlock,  // filter chain over bodies[0]
  kBreak,
  kContinue,
  kScope,  // bodies[0] in its own scope ({% generation %} and similar)
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Node {
  NodeKind kind = NodeKind::kText;
  int line = 0;
  int col = 0;
  std::string text;                  // kText; the macro name; the attribute of `set ns.attr`
  ExprPtr expr;                      // output/for iterable/set value/call expression
  ExprPtr filter;                    // kFor: the `if` condition; kSet/kFilterBlock: filter chain
  std::vector<std::string> targets;  // kFor, kSet
  bool target_is_tuple = false;      // `for a, b in ...` / `set a, b = ...`
  std::vector<ExprPtr> conditions;   // kIf
  std::vector<Body> bodies;
  std::vector<MacroParam> params;  // kMacro, kCallBlock
};

struct Template {
  Body body;
};

}  // namespace fak::jinja
