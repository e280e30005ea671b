// The pieces of request parsing shared by openai.cpp: typed field readers that name the field in
// their errors, and the constraint fields (response_format, json_schema, grammar, tools,
// tool_choice, parallel_tool_calls) that turn into a grammar on the generation request.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "server/openai.h"

namespace fak::server::fields {

using Json = nlohmann::ordered_json;

ApiError Bad(std::string param, std::string message);
const char* TypeName(const Json& v);
// Each reads an optional field (absent or null: *v is left as it is); false with `err` set when the
// field has the wrong type or is out of [lo, hi].
bool GetBool(const Json& b, const char* key, bool* v, ApiError* err);
bool GetNumber(const Json& b, const char* key, double lo, double hi, double* v, ApiError* err);
bool GetInt(const Json& b, const char* key, int64_t lo, int64_t hi, int64_t* v, ApiError* err);

// response_format (chat), and the extensions "json_schema" (a schema) and "grammar" (grammar text,
// docs/grammar.md) on both endpoints: at most one; sets out->gen.limits.grammar.
bool ParseOutputFormat(const Json& body, const ModelInfo& model, ApiRequest* out, ApiError* err);
// tools, tool_choice and parallel_tool_calls. `tools_out`: what the template renders (null: none).
bool ParseTools(const Json& body, const ModelInfo& model, ApiRequest* out, Json* tools_out, ApiError* err);

}  // namespace fak::server::fields
