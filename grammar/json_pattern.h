// A JSON schema's `pattern`: a regex subset (ECMA-style: literals, classes, `.`, groups, `|`, `* + ?
// {m,n}`, \d \w \s and their negations, `^`/`$` at the ends) lowered to grammar text for a quoted
// JSON string whose characters match it. Quotes, backslashes and controls the regex names are
// matched as their JSON escapes; an unanchored end is a search (any characters, `char_rule`, around).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace fak::grammar {

// InvalidArgument "pattern: ..." names an unsupported construct (backreferences, lookaround, ...).
Result<std::string> PatternToGrammar(std::string_view re, const std::string& char_rule);

// Grammar alternatives, each in parentheses: "(a) | (b)".
std::string JoinAlternatives(const std::vector<std::string>& alts);

}  // namespace fak::grammar
