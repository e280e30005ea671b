#include "tokenizer/jinja/parser.h"

#include <initializer_list>

namespace fak::jinja {

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

std::string Describe(const Token& t) {
  switch (t.type) {
    case TokenType::kName:
    case TokenType::kOperator:
      return fmt::format("'{}'", t.text);
    case TokenType::kString:
      return "string literal";
    case TokenType::kInteger:
    case TokenType::kFloat:
      return fmt::format("number {}", t.text);
    default:
      return TypeText(t.type);
  }
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const ParseLimits& limits) : toks_(std::move(tokens)), limits_(limits) {}

  Result<Template> Run() {
    Template t;
    std::string stop;
    FAK_RETURN_IF_ERROR(ParseBody({}, &t.body, &stop, nullptr));
    return t;
  }

 private:
  // ---- token helpers -------------------------------------------------------------------------
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
  Status Expected(const char* what) const { return ErrorAt(Cur(), "expected {}, got {}", what, Describe(Cur())); }
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

  // ---- statements ----------------------------------------------------------------------------
  // Parses nodes until a block tag whose name is in `stops` (left unconsumed after '{%' and the name;
  // its name goes to *stop). `opener` names the block for the end-of-template error.
  Status ParseBody(std::initializer_list<const char*> stops, Body* body, std::string* stop, const Token* opener) {
    DepthGuard g(&depth_);
    FAK_RETURN_IF_ERROR(CheckDepth());
    while (true) {
      const Token& t = Cur();
      if (t.type == TokenType::kEof) {
        if (stops.size() == 0) return Status::Ok();
        std::string want;
        for (const char* s : stops) want += fmt::format("{}'{}'", want.empty() ? "" : " or ", s);
        return ErrorAt(t, "unexpected end of template: expected {} to close the block opened at line {}", want,
                       opener ? opener->line : 0);
      }
      if (t.type == TokenType::kText) {
        auto n = std::make_unique<Node>();
        n->kind = NodeKind::kText;
        n->line = t.line;
        n->col = t.col;
        n->text = t.text;
        body->push_back(std::move(n));
        Next();
        continue;
      }
      if (t.type == TokenType::kVarBegin) {
        Next();
        auto n = std::make_unique<Node>();
        n->kind = NodeKind::kOutput;
        n->line = t.line;
        n->col = t.col;
        FAK_ASSIGN_OR_RETURN(n->expr, ParseTuple(true));
        if (Cur().type != TokenType::kVarEnd) return Expected("end of print statement '}}'");
        Next();
        body->push_back(std::move(n));
        continue;
      }
      if (t.type != TokenType::kBlockBegin) return ErrorAt(t, "unexpected {}", Describe(t));
      const Token& name = Peek();
      if (name.type != TokenType::kName) return ErrorAt(name, "expected a tag name, got {}", Describe(name));
      for (const char* s : stops) {
        if (name.text == s) {
          *stop = name.text;
          Next();
          Next();
          return Status::Ok();
        }
      }
      Next();
      FAK_RETURN_IF_ERROR(ParseStatement(body));
    }
  }

  Status ParseStatement(Body* body) {
    const Token tag = Cur();  // the tag name
    auto n = std::make_unique<Node>();
    n->line = tag.line;
    n->col = tag.col;
    const std::string& w = tag.text;
    Next();
    std::string stop;
    if (w == "if") {
      n->kind = NodeKind::kIf;
      FAK_ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(false));
      n->conditions.push_back(std::move(cond));
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      while (true) {
        Body b;
        FAK_RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, &b, &stop, &tag));
        n->bodies.push_back(std::move(b));
        if (stop == "elif") {
          FAK_ASSIGN_OR_RETURN(ExprPtr c, ParseTuple(false));
          n->conditions.push_back(std::move(c));
          FAK_RETURN_IF_ERROR(ExpectBlockEnd());
          continue;
        }
        FAK_RETURN_IF_ERROR(ExpectBlockEnd());
        if (stop == "else") {
          Body e;
          FAK_RETURN_IF_ERROR(ParseBody({"endif"}, &e, &stop, &tag));
          FAK_RETURN_IF_ERROR(ExpectBlockEnd());
          n->bodies.push_back(std::move(e));
        }
        break;
      }
    } else if (w == "for") {
      n->kind = NodeKind::kFor;
      FAK_RETURN_IF_ERROR(ParseTargets(n.get(), "in"));
      if (!IsName("in")) return Expected("'in'");
      Next();
      FAK_ASSIGN_OR_RETURN(n->expr, ParseTuple(false));
      if (IsName("if")) {
        Next();
        FAK_ASSIGN_OR_RETURN(n->filter, ParseExpression(true));
      }
      if (IsName("recursive")) return ErrorAt(Cur(), "recursive loops are not supported");
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      Body b;
      ++loop_depth_;
      Status st = ParseBody({"endfor", "else"}, &b, &stop, &tag);
      --loop_depth_;
      FAK_RETURN_IF_ERROR(st);
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      n->bodies.push_back(std::move(b));
      Body e;
      if (stop == "else") {
        FAK_RETURN_IF_ERROR(ParseBody({"endfor"}, &e, &stop, &tag));
        FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      }
      n->bodies.push_back(std::move(e));
    } else if (w == "set") {
      n->kind = NodeKind::kSet;
      FAK_ASSIGN_OR_RETURN(std::string first, ExpectName());
      n->targets.push_back(first);
      if (IsOp(".")) {
        Next();
        FAK_ASSIGN_OR_RETURN(n->text, ExpectName());
      } else if (IsOp(",")) {
        n->target_is_tuple = true;
        while (IsOp(",")) {
          Next();
          if (Cur().type != TokenType::kName) break;
          n->targets.push_back(Cur().text);
          Next();
        }
      }
      if (IsOp("=")) {
        Next();
        FAK_ASSIGN_OR_RETURN(n->expr, ParseTuple(true));
        FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      } else {
        if (n->target_is_tuple || !n->text.empty()) return Expected("'='");
        if (IsOp("|")) {
          FAK_ASSIGN_OR_RETURN(n->filter, ParseFilterChain(nullptr));
        }
        FAK_RETURN_IF_ERROR(ExpectBlockEnd());
        Body b;
        FAK_RETURN_IF_ERROR(ParseBody({"endset"}, &b, &stop, &tag));
        FAK_RETURN_IF_ERROR(ExpectBlockEnd());
        n->bodies.push_back(std::move(b));
      }
    } else if (w == "macro") {
      n->kind = NodeKind::kMacro;
      FAK_ASSIGN_OR_RETURN(n->text, ExpectName());
      FAK_RETURN_IF_ERROR(ParseParams(n.get(), true));
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      Body b;
      int saved_loops = loop_depth_;
      loop_depth_ = 0;  // a macro body cannot break out of the caller's loop
      Status st = ParseBody({"endmacro"}, &b, &stop, &tag);
      loop_depth_ = saved_loops;
      FAK_RETURN_IF_ERROR(st);
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      n->bodies.push_back(std::move(b));
    } else if (w == "call") {
      n->kind = NodeKind::kCallBlock;
      if (IsOp("(")) FAK_RETURN_IF_ERROR(ParseParams(n.get(), true));
      FAK_ASSIGN_OR_RETURN(n->expr, ParseExpression(true));
      if (n->expr->kind != ExprKind::kCall) return ErrorAt(tag, "expected a call after 'call'");
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      Body b;
      FAK_RETURN_IF_ERROR(ParseBody({"endcall"}, &b, &stop, &tag));
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      n->bodies.push_back(std::move(b));
    } else if (w == "filter") {
      n->kind = NodeKind::kFilterBlock;
      FAK_ASSIGN_OR_RETURN(n->filter, ParseFilterChain(nullptr, /*leading_pipe=*/false));
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      Body b;
      FAK_RETURN_IF_ERROR(ParseBody({"endfilter"}, &b, &stop, &tag));
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      n->bodies.push_back(std::move(b));
    } else if (w == "generation") {  // transformers' assistant-mask extension: renders its body
      n->kind = NodeKind::kScope;
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      Body b;
      FAK_RETURN_IF_ERROR(ParseBody({"endgeneration"}, &b, &stop, &tag));
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      n->bodies.push_back(std::move(b));
    } else if (w == "break" || w == "continue") {
      if (loop_depth_ == 0) return ErrorAt(tag, "'{}' outside of a loop", w);
      n->kind = w == "break" ? NodeKind::kBreak : NodeKind::kContinue;
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (w == "include" || w == "import" || w == "from" || w == "extends" || w == "block") {
      return ErrorAt(tag, "tag '{}' is not supported (templates are self-contained)", w);
    } else {
      return ErrorAt(tag, "unknown tag '{}'", w);
    }
    body->push_back(std::move(n));
    return Status::Ok();
  }

  // for/set targets: `a` or `a, b` or `(a, b)`.
  Status ParseTargets(Node* n, const char* end_word) {
    bool paren = IsOp("(");
    if (paren) Next();
    while (true) {
      FAK_ASSIGN_OR_RETURN(std::string name, ExpectName());
      n->targets.push_back(name);
      if (!IsOp(",")) break;
      n->target_is_tuple = true;
      Next();
      if (IsName(end_word) || IsOp(")")) break;
    }
    if (paren) FAK_RETURN_IF_ERROR(ExpectOp(")"));
    if (n->targets.size() > 1) n->target_is_tuple = true;
    return Status::Ok();
  }

  Status ParseParams(Node* n, bool allow_defaults) {
    FAK_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!n->params.empty()) FAK_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
      MacroParam p;
      FAK_ASSIGN_OR_RETURN(p.name, ExpectName());
      if (IsOp("=") && allow_defaults) {
        Next();
        FAK_ASSIGN_OR_RETURN(p.default_value, ParseExpression(true));
      } else if (!n->params.empty() && n->params.back().default_value) {
        return ErrorAt(Cur(), "non-default argument '{}' follows default argument", p.name);
      }
      n->params.push_back(std::move(p));
    }
    Next();
    return Status::Ok();
  }

  // ---- expressions ---------------------------------------------------------------------------
  // expr [, expr ...] -> a tuple when there is a comma.
  Result<ExprPtr> ParseTuple(bool with_condexpr) {
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

  bool StartsExpression() const {
    const Token& t = Cur();
    switch (t.type) {
      case TokenType::kName:
      case TokenType::kString:
      case TokenType::kInteger:
      case TokenType::kFloat:
        return true;
      case TokenType::kOperator:
        return t.text == "(" || t.text == "[" || t.text == "{" || t.text == "-" || t.text == "+";
      default:
        return false;
    }
  }

  Result<ExprPtr> ParseExpression(bool with_condexpr) {
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

  Result<ExprPtr> ParseOr() {
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

  Result<ExprPtr> ParseAnd() {
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

  Result<ExprPtr> ParseNot() {
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

  Result<ExprPtr> ParseCompare() {
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

  using SubParser = Result<ExprPtr> (Parser::*)();
  Result<ExprPtr> ParseBinary(std::initializer_list<const char*> ops, SubParser sub) {
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
  Result<ExprPtr> ParseMath1() { return ParseBinary({"+", "-"}, &Parser::ParseConcat); }
  Result<ExprPtr> ParseConcat() { return ParseBinary({"~"}, &Parser::ParseMath2); }
  Result<ExprPtr> ParseMath2() { return ParseBinary({"*", "/", "//", "%"}, &Parser::ParsePow); }
  Result<ExprPtr> ParsePow() { return ParseBinary({"**"}, &Parser::ParseUnaryWithFilters); }
  Result<ExprPtr> ParseUnaryWithFilters() { return ParseUnary(true); }

  Result<ExprPtr> ParseUnary(bool with_filter) {
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

  Result<ExprPtr> ParsePrimary() {
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
      default:
        break;
    }
    return ErrorAt(t, "unexpected {}", Describe(t));
  }

  Result<ExprPtr> ParsePostfix(ExprPtr node) {
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

  Result<ExprPtr> ParseSubscript(ExprPtr node) {
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

  Status ParseArgs(Expr* call) {
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
  static void StartAt(Expr* e, const Expr& first) {
    e->line = first.line;
    e->col = first.col;
  }

  Result<ExprPtr> ParseCall(ExprPtr callee) {
    ExprPtr c = MakeExpr(ExprKind::kCall, Cur());
    StartAt(c.get(), *callee);
    c->children.push_back(std::move(callee));
    FAK_RETURN_IF_ERROR(ParseArgs(c.get()));
    return c;
  }

  Result<std::string> ParseDottedName() {
    FAK_ASSIGN_OR_RETURN(std::string name, ExpectName());
    while (IsOp(".") && Peek().type == TokenType::kName) {
      Next();
      name += "." + Cur().text;
      Next();
    }
    return name;
  }

  // `| f(args) | g` applied to `node` (null for filter blocks and block sets).
  Result<ExprPtr> ParseFilterChain(ExprPtr node, bool leading_pipe = true) {
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

  Result<ExprPtr> ParseFilterExpr(ExprPtr node) {
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

  std::vector<Token> toks_;
  ParseLimits limits_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Result<Template> ParseTemplate(std::string_view source, const LexOptions& lex, const ParseLimits& limits) {
  FAK_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source, lex));
  Parser p(std::move(tokens), limits);
  return p.Run();
}

}  // namespace fak::jinja
