// The token cursor and expression grammar of the template parser (parser.cpp adds statements).
// Internal to tokenizer/jinja.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser.h"  // ParseLimits

namespace fak::jinja::internal {

// "'+'", "string literal", "end of template": how a token reads in an error message.
std::string Describe(const Token& t);

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, const ParseLimits& limits)
      : toks_(std::move(tokens)), limits_(limits) {}

 protected:
  // ---- token cursor ----------------------------------------------------------------------------
  const Token& Cur() const { return toks_[i_]; }
  const Token& Peek(size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  void Next() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  bool IsOp(const char* op) const { return Cur().type == TokenType::kOperator && Cur().text == op; }
  bool IsName(const char* name) const { return Cur().type == TokenType::kName && Cur().text == name; }

  template <typename... Args>
  Status ErrorAt(const Token& t, fmt::format_string<Args...> f, Args&&... args) const {
    return InvalidArgument("{}{}", Where(t.line, t.col), fmt::format(f, std::forward<Args>(args)...));
  }
  Status Expected(const char* what) const {
    return ErrorAt(Cur(), "expected {}, got {}", what, Describe(Cur()));
  }
  Status ExpectOp(const char* op) {
    if (!IsOp(op)) return ErrorAt(Cur(), "expected '{}', got {}", op, Describe(Cur()));
    Next();
    return Status::Ok();
  }
  Status ExpectBlockEnd() {
    if (Cur().type != TokenType::kBlockEnd) return Expected("end of statement block '%}'");
    Next();
    return Status::Ok();
  }
  Result<std::string> ExpectName() {
    if (Cur().type != TokenType::kName) return Expected("a name");
    std::string n = Cur().text;
    Next();
    return n;
  }

  struct DepthGuard {
    int* depth;
    explicit DepthGuard(int* d) : depth(d) { ++*depth; }
    ~DepthGuard() { --*depth; }
  };
  Status CheckDepth() const {
    if (depth_ > limits_.max_nesting) {
      return ErrorAt(Cur(), "template nests deeper than {} levels", limits_.max_nesting);
    }
    return Status::Ok();
  }

  ExprPtr MakeExpr(ExprKind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->col = at.col;
    return e;
  }

  // ---- expressions (lowest precedence first) -------------------------------------------------
  Result<ExprPtr> ParseTuple(bool with_condexpr);
  bool StartsExpression() const;
  Result<ExprPtr> ParseExpression(bool with_condexpr);
  Result<ExprPtr> ParseOr();
  Result<ExprPtr> ParseAnd();
  Result<ExprPtr> ParseNot();
  Result<ExprPtr> ParseCompare();
  using SubParser = Result<ExprPtr> (ExprParser::*)();
  Result<ExprPtr> ParseMath1() { return ParseBinary({"+", "-"}, &ExprParser::ParseConcat); }
  Result<ExprPtr> ParseConcat() { return ParseBinary({"~"}, &ExprParser::ParseMath2); }
  Result<ExprPtr> ParseMath2() { return ParseBinary({"*", "/", "//", "%"}, &ExprParser::ParsePow); }
  Result<ExprPtr> ParsePow() { return ParseBinary({"**"}, &ExprParser::ParseUnaryWithFilters); }
  Result<ExprPtr> ParseUnaryWithFilters() { return ParseUnary(true); }
  Result<ExprPtr> ParseBinary(std::initializer_list<const char*> ops, SubParser sub);
  Result<ExprPtr> ParseUnary(bool with_filter);
  Result<ExprPtr> ParsePrimary();
  Result<ExprPtr> ParsePostfix(ExprPtr node);
  Result<ExprPtr> ParseSubscript(ExprPtr node);
  Status ParseArgs(Expr* call);
  static void StartAt(Expr* e, const Expr& first);
  Result<ExprPtr> ParseCall(ExprPtr callee);
  Result<std::string> ParseDottedName();
  Result<ExprPtr> ParseFilterChain(ExprPtr node, bool leading_pipe = true);
  Result<ExprPtr> ParseFilterExpr(ExprPtr node);

  std::vector<Token> toks_;
  ParseLimits limits_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace fak::jinja::internal
