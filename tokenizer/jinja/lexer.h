// Template lexer: splits source into text and tag tokens, applying whitespace control the way
// HF transformers configures jinja2 (trim_blocks, lstrip_blocks, no trailing newline kept).
//
// - `{%- ... -%}`, `{{- ... -}}`, `{#- ... -#}`: '-' strips all whitespace on that side.
// - trim_blocks: the first newline after a block or comment tag is removed.
// - lstrip_blocks: spaces and tabs from the start of a line up to a block or comment tag are removed
//   (`{%+` turns that off for one tag). Variable tags `{{` are never lstripped.
// - \r\n and \r become \n, and one trailing newline of the template is dropped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace fak::jinja {

enum class TokenType : uint8_t {
  kText,        // literal output
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the unescaped value
  kInteger,
  kFloat,
  kOperator,  // text holds the operator: "+", "//", "==", "(", ...
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int col = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Errors read "template:LINE:COL: message".
Result<std::vector<Token>> Tokenize(std::string_view source, const LexOptions& options = {});

// "template:LINE:COL: " for error messages.
std::string Where(int line, int col);

}  // namespace fak::jinja
