#include "tokenizer/jinja/parser.h"

#include <initializer_list>

#include "tokenizer/jinja/expr_parser.h"  // ExprParser: tokens and expressions

namespace fak::jinja {

namespace {

class Parser : public internal::ExprParser {
 public:
  using ExprParser::ExprParser;

  Result<Template> Run() {
    Template t;
    std::string stop;
    FAK_RETURN_IF_ERROR(ParseBody({}, &t.body, &stop, nullptr));
    return t;
  }

 private:
  // ---- statements ----------------------------------------------------------------------------
  // Parses nodes until a block tag whose name is in `stops` (left unconsumed after '{%' and the name;
  // its name goes to *stop). `opener` names the block for the end-of-template error.
  Status ParseBody(std::initializer_list<const char*> stops, Body* body, std::string* stop,
                   const Token* opener) {
    DepthGuard g(&depth_);
    FAK_RETURN_IF_ERROR(CheckDepth());
    while (true) {
      const Token& t = Cur();
      if (t.type == TokenType::kEof) {
        if (stops.size() == 0) return Status::Ok();
        std::string want;
        for (const char* s : stops) want += fmt::format("{}'{}'", want.empty() ? "" : " or ", s);
        return ErrorAt(t, "unexpected end of template: expected {} to close the block opened at line {}",
                       want, opener ? opener->line : 0);
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
      if (t.type != TokenType::kBlockBegin) return ErrorAt(t, "unexpected {}", internal::Describe(t));
      const Token& name = Peek();
      if (name.type != TokenType::kName)
        return ErrorAt(name, "expected a tag name, got {}", internal::Describe(name));
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
};

}  // namespace

Result<Template> ParseTemplate(std::string_view source, const LexOptions& lex, const ParseLimits& limits) {
  FAK_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source, lex));
  Parser p(std::move(tokens), limits);
  return p.Run();
}

}  // namespace fak::jinja
