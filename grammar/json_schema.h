// JSON schemas as grammars: every text the grammar completes is JSON that validates against the
// schema. Supported: type (one or a list), properties, required, additionalProperties (false, true
// or a schema), enum, const, items, prefixItems, minItems/maxItems, anyOf, oneOf (its branches must be
// disjoint), allOf with one schema, $ref to #/$defs and #/definitions (recursion allowed), strings
// with minLength/maxLength, pattern (a regex subset) or format (date, time, date-time, uuid), integers
// with minimum/maximum/exclusive bounds, numbers with integer-valued bounds. Anything else in a schema
// is refused with InvalidArgument naming the keyword and where it is (a JSON pointer), never ignored.
//
// Objects list their properties in the schema's order; properties outside `properties` are only
// generated for schemas without `properties` (a free map). Whitespace between tokens is bounded, and
// so are the digits of unbounded numbers, so a model cannot pad forever.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace fak::grammar {

// Grammar text (docs/grammar.md) with the start rule `root`.
Result<std::string> JsonSchemaToGrammar(const nlohmann::ordered_json& schema);

// Any JSON object: OpenAI's {"type": "json_object"} response format.
std::string JsonObjectGrammar();

// The grammar's rule definitions for one JSON value matching `schema`, named `name`, for embedding in
// a larger grammar (tool calls): `rules` gains the definitions, `name` is the rule to reference.
Status AppendJsonSchemaRules(const nlohmann::ordered_json& schema, const std::string& name,
                             std::string* rules);

}  // namespace fak::grammar
