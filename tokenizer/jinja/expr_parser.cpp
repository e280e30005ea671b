#include "tokenizer/jinja/expr_parser.h"

namespace fak::jinja::internal {

namespace {

const char* TypeText(TokenType t) {
  switch (t) {
    case TokenType::kText: return "text";
    case TokenType::kVarBegin: return "'{{'";
    case TokenType::kVarEnd: return "end of print statement '}}'";
    case TokenType::kBlockBegin: return "'{%'";
    case TokenType::kBlockEnd: return "end of statement block '%}'";
    case TokenType::kName: return "name";
    case TokenType::kString: return "string";
    case TokenType::kInteger: return "integer";
    case TokenType::kFloat: return "float";
    case TokenType::kOperator: return "operator";
    case TokenType::kEof: return "end of template";
  }
  return "token";
}

}  // namespace

std::string Describe(const Token& t) {
  switch (t.type) {
    case TokenType::kName:
    case TokenType::kOperator: return fmt::format("'{}'", t.text);
    case TokenType::kString: return "string literal";
    case TokenType::kInteger:
    case TokenType::kFloat: return fmt::format("number {}", t.text);
    default: return TypeText(t.type);
  }
}

// expr [, expr ...] -> a tuple when there is a comma.

Result<ExprPtr> ExprParser::ParseTuple(bool with_condexpr) {
  const Token start = Cur();
  FAK_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(with_condexpr));
  if (!IsOp(",")) return first;
  ExprPtr t = MakeExpr(ExprKind::kTuple, start);
  t->children.push_back(std::move(first));
  while (IsOp(",")) {
    Next();
    if (!StartsExpression()) break;
    FAK_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(with_condexpr));
    t->children.push_back(std::move(e));
  }
  return t;
}

bool ExprParser::StartsExpression() const {
  const Token& t = Cur();
  switch (t.type) {
    case TokenType::kName:
    case TokenType::kString:
    case TokenType::kInteger:
    case TokenType::kFloat: return true;
    case TokenType::kOperator:
      return t.text == "(" || t.text == "[" || t.text == "{" || t.text == "-" || t.text == "+";
    default: return false;
  }
}

Result<ExprPtr> ExprParser::ParseExpression(bool with_condexpr) {
  DepthGuard g(&depth_);
  FAK_RETURN_IF_ERROR(CheckDepth());
  if (!with_condexpr) return ParseOr();
  FAK_ASSIGN_OR_RETURN(ExprPtr e, ParseOr());
  while (IsName("if")) {
    const Token at = Cur();
    Next();
    ExprPtr c = MakeExpr(ExprKind::kCondExpr, at);
    FAK_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
    ExprPtr other;
    if (IsName("else")) {
      Next();
      FAK_ASSIGN_OR_RETURN(other, ParseExpression(true));
    }
    c->children.push_back(std::move(cond));
    c->children.push_back(std::move(e));
    c->children.push_back(std::move(other));
    e = std::move(c);
  }
  return e;
}

Result<ExprPtr> ExprParser::ParseOr() {
  FAK_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (IsName("or")) {
    ExprPtr n = MakeExpr(ExprKind::kOr, Cur());
    Next();
    FAK_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    n->children.push_back(std::move(left));
    n->children.push_back(std::move(right));
    left = std::move(n);
  }
  return left;
}

Result<ExprPtr> ExprParser::ParseAnd() {
  FAK_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (IsName("and")) {
    ExprPtr n = MakeExpr(ExprKind::kAnd, Cur());
    Next();
    FAK_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    n->children.push_back(std::move(left));
    n->children.push_back(std::move(right));
    left = std::move(n);
  }
  return left;
}

Result<ExprPtr> ExprParser::ParseNot() {
  if (IsName("not")) {
    DepthGuard g(&depth_);
    FAK_RETURN_IF_ERROR(CheckDepth());
    ExprPtr n = MakeExpr(ExprKind::kNot, Cur());
    Next();
    FAK_ASSIGN_OR_RETURN(ExprPtr inner, ParseNot());
    n->children.push_back(std::move(inner));
    return n;
  }
  return ParseCompare();
}

Result<ExprPtr> ExprParser::ParseCompare() {
  const Token start = Cur();
  FAK_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (Cur().type == TokenType::kOperator &&
        (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == "<=" ||
         Cur().text == ">" || Cur().text == ">=")) {
      op = Cur().text;
      Next();
    } else if (IsName("in")) {
      op = "in";
      Next();
    } else if (IsName("not") && Peek().type == TokenType::kName && Peek().text == "in") {
      op = "notin";
      Next();
      Next();
    } else {
      break;
    }
    if (!cmp) {
      cmp = MakeExpr(ExprKind::kCompare, start);
      cmp->children.push_back(std::move(first));
    }
    FAK_ASSIGN_OR_RETURN(ExprPtr right, ParseMath1());
    cmp->ops.push_back(op);
    cmp->children.push_back(std::move(right));
  }
  return cmp ? std::move(cmp) : std::move(first);
}

Result<ExprPtr> ExprParser::ParseBinary(std::initializer_list<const char*> ops, SubParser sub) {
  FAK_ASSIGN_OR_RETURN(ExprPtr left, (this->*sub)());
  while (true) {
    const char* hit = nullptr;
    for (const char* op : ops) {
      if (IsOp(op)) hit = op;
    }
    if (!hit) return left;
    ExprPtr n = MakeExpr(ExprKind::kBinary, Cur());
    n->name = hit;
    Next();
    FAK_ASSIGN_OR_RETURN(ExprPtr right, (this->*sub)());
    n->children.push_back(std::move(left));
    n->children.push_back(std::move(right));
    left = std::move(n);
  }
}

Result<ExprPtr> ExprParser::ParseUnary(bool with_filter) {
  DepthGuard g(&depth_);
  FAK_RETURN_IF_ERROR(CheckDepth());
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    node = MakeExpr(IsOp("-") ? ExprKind::kNeg : ExprKind::kPos, Cur());
    Next();
    FAK_ASSIGN_OR_RETURN(ExprPtr inner, ParseUnary(false));
    node->children.push_back(std::move(inner));
  } else {
    FAK_ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  FAK_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    FAK_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

Result<ExprPtr> ExprParser::ParsePrimary() {
  const Token t = Cur();
  switch (t.type) {
    case TokenType::kName: {
      Next();
      ExprPtr e = MakeExpr(ExprKind::kLiteral, t);
      if (t.text == "true" || t.text == "True") {
        e->value = Value(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value::None();
      } else {
        e->kind = ExprKind::kName;
        e->name = t.text;
      }
      return e;
    }
    case TokenType::kString: {
      std::string s;
      while (Cur().type == TokenType::kString) {  // adjacent literals concatenate
        s += Cur().text;
        Next();
      }
      ExprPtr e = MakeExpr(ExprKind::kLiteral, t);
      e->value = Value(std::move(s));
      return e;
    }
    case TokenType::kInteger:
    case TokenType::kFloat: {
      Next();
      ExprPtr e = MakeExpr(ExprKind::kLiteral, t);
      e->value = t.type == TokenType::kInteger ? Value(t.int_value) : Value(t.float_value);
      return e;
    }
    case TokenType::kOperator:
      if (t.text == "(") {
        Next();
        if (IsOp(")")) {
          Next();
          return MakeExpr(ExprKind::kTuple, t);
        }
        FAK_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(true));
        if (IsOp(",")) {
          ExprPtr tup = MakeExpr(ExprKind::kTuple, t);
          tup->children.push_back(std::move(first));
          while (IsOp(",")) {
            Next();
            if (IsOp(")")) break;
            FAK_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
            tup->children.push_back(std::move(e));
          }
          first = std::move(tup);
        }
        FAK_RETURN_IF_ERROR(ExpectOp(")"));
        return first;
      }
      if (t.text == "[") {
        Next();
        ExprPtr l = MakeExpr(ExprKind::kList, t);
        while (!IsOp("]")) {
          if (!l->children.empty()) FAK_RETURN_IF_ERROR(ExpectOp(","));
          if (IsOp("]")) break;
          FAK_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
          l->children.push_back(std::move(e));
        }
        Next();
        return l;
      }
      if (t.text == "{") {
        Next();
        ExprPtr d = MakeExpr(ExprKind::kDict, t);
        while (!IsOp("}")) {
          if (!d->children.empty()) FAK_RETURN_IF_ERROR(ExpectOp(","));
          if (IsOp("}")) break;
          FAK_ASSIGN_OR_RETURN(ExprPtr k, ParseExpression(true));
          FAK_RETURN_IF_ERROR(ExpectOp(":"));
          FAK_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
          d->children.push_back(std::move(k));
          d->children.push_back(std::move(v));
        }
        Next();
        return d;
      }
      break;
    default: break;
  }
  return ErrorAt(t, "unexpected {}", Describe(t));
}

Result<ExprPtr> ExprParser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".")) {
      const Token at = Cur();
      Next();
      if (Cur().type == TokenType::kName) {
        ExprPtr g = MakeExpr(ExprKind::kGetAttr, at);
        StartAt(g.get(), *node);
        g->name = Cur().text;
        g->children.push_back(std::move(node));
        node = std::move(g);
        Next();
      } else if (Cur().type == TokenType::kInteger) {
        ExprPtr g = MakeExpr(ExprKind::kGetItem, at);
        ExprPtr idx = MakeExpr(ExprKind::kLiteral, Cur());
        idx->value = Value(Cur().int_value);
        g->children.push_back(std::move(node));
        g->children.push_back(std::move(idx));
        node = std::move(g);
        Next();
      } else {
        return Expected("an attribute name after '.'");
      }
    } else if (IsOp("[")) {
      FAK_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      FAK_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> ExprParser::ParseSubscript(ExprPtr node) {
  const Token at = Cur();
  Next();  // [
  ExprPtr parts[3];
  int colons = 0;
  while (!IsOp("]")) {
    if (IsOp(":")) {
      if (++colons > 2) return Expected("']'");
      Next();
      continue;
    }
    if (parts[colons]) return Expected("':' or ']'");
    FAK_ASSIGN_OR_RETURN(parts[colons], ParseExpression(true));
  }
  Next();
  if (colons == 0) {
    if (!parts[0]) return ErrorAt(at, "expected an index inside '[]'");
    ExprPtr g = MakeExpr(ExprKind::kGetItem, at);
    g->children.push_back(std::move(node));
    g->children.push_back(std::move(parts[0]));
    return g;
  }
  ExprPtr s = MakeExpr(ExprKind::kSlice, at);
  s->children.push_back(std::move(node));
  for (auto& p : parts) s->children.push_back(std::move(p));
  return s;
}

Status ExprParser::ParseArgs(Expr* call) {
  FAK_RETURN_IF_ERROR(ExpectOp("("));
  bool first = true;
  while (!IsOp(")")) {
    if (!first) FAK_RETURN_IF_ERROR(ExpectOp(","));
    first = false;
    if (IsOp(")")) break;
    if (IsOp("*") || IsOp("**")) return ErrorAt(Cur(), "*args and **kwargs in calls are not supported");
    if (Cur().type == TokenType::kName && Peek().type == TokenType::kOperator && Peek().text == "=") {
      std::string key = Cur().text;
      Next();
      Next();
      FAK_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
      call->kwargs.emplace_back(std::move(key), std::move(v));
    } else {
      if (!call->kwargs.empty()) return ErrorAt(Cur(), "positional argument follows keyword argument");
      FAK_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
      call->children.push_back(std::move(v));
    }
  }
  Next();
  return Status::Ok();
}

// Calls and attribute lookups report errors at the start of the expression they extend.

void ExprParser::StartAt(Expr* e, const Expr& first) {
  e->line = first.line;
  e->col = first.col;
}

Result<ExprPtr> ExprParser::ParseCall(ExprPtr callee) {
  ExprPtr c = MakeExpr(ExprKind::kCall, Cur());
  StartAt(c.get(), *callee);
  c->children.push_back(std::move(callee));
  FAK_RETURN_IF_ERROR(ParseArgs(c.get()));
  return c;
}

Result<std::string> ExprParser::ParseDottedName() {
  FAK_ASSIGN_OR_RETURN(std::string name, ExpectName());
  while (IsOp(".") && Peek().type == TokenType::kName) {
    Next();
    name += "." + Cur().text;
    Next();
  }
  return name;
}

// `| f(args) | g` applied to `node` (null for filter blocks and block sets).

Result<ExprPtr> ExprParser::ParseFilterChain(ExprPtr node, bool leading_pipe) {
  bool first = true;
  while (IsOp("|") || (first && !leading_pipe)) {
    if (IsOp("|")) Next();
    first = false;
    ExprPtr f = MakeExpr(ExprKind::kFilter, Cur());
    FAK_ASSIGN_OR_RETURN(f->name, ParseDottedName());
    f->children.push_back(std::move(node));
    if (IsOp("(")) FAK_RETURN_IF_ERROR(ParseArgs(f.get()));
    node = std::move(f);
  }
  return node;
}

Result<ExprPtr> ExprParser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      const Token at = Cur();
      Next();
      ExprPtr f = MakeExpr(ExprKind::kFilter, at);
      FAK_ASSIGN_OR_RETURN(f->name, ParseDottedName());
      f->children.push_back(std::move(node));
      if (IsOp("(")) FAK_RETURN_IF_ERROR(ParseArgs(f.get()));
      node = std::move(f);
    } else if (IsName("is")) {
      ExprPtr t = MakeExpr(ExprKind::kTest, Cur());
      Next();
      if (IsName("not")) {
        t->negated = true;
        Next();
      }
      FAK_ASSIGN_OR_RETURN(t->name, ParseDottedName());
      t->children.push_back(std::move(node));
      if (IsOp("(")) {
        FAK_RETURN_IF_ERROR(ParseArgs(t.get()));
      } else if ((Cur().type == TokenType::kName || Cur().type == TokenType::kString ||
                  Cur().type == TokenType::kInteger || Cur().type == TokenType::kFloat || IsOp("[") ||
                  IsOp("{")) &&
                 !IsName("else") && !IsName("or") && !IsName("and") && !IsName("if")) {
        if (IsName("is")) return ErrorAt(Cur(), "cannot chain multiple tests with 'is'");
        FAK_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
        FAK_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
        t->children.push_back(std::move(arg));
      }
      node = std::move(t);
    } else if (IsOp("(")) {
      FAK_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

}  // namespace fak::jinja::internal
