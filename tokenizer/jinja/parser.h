// Template parser: tokens to syntax tree, with jinja2's grammar and operator precedence
// (lowest first): `a if c else b`, or, and, not, comparisons (chained; in, not in), + -, ~,
// * / // %, **, unary - +, then primaries with .attr, [index], [a:b:c], calls, | filters, is tests.
#pragma once

#include <string_view>

#include "core/status.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace fak::jinja {

struct ParseLimits {
  int max_nesting = 128;  // nested expressions and blocks; deeper templates are rejected, not recursed
};

// Errors read "template:LINE:COL: message".
Result<Template> ParseTemplate(std::string_view source, const LexOptions& lex = {},
                               const ParseLimits& limits = {});

}  // namespace fak::jinja
