// Built-in filters, tests, methods and globals: what jinja2 plus transformers' chat-template
// environment (tojson, raise_exception, strftime_now) offer, implemented over Value.
#pragma once

#include <string_view>

#include "core/status.h"
#include "tokenizer/jinja/value.h"

namespace fak::jinja {

class Interpreter;
class Scope;

// `x | name(args)`. NotFound when no such filter exists.
Result<Value> CallFilter(Interpreter& in, std::string_view name, const Value& input, const CallArgs& args);
// `x is name(args)`. NotFound when no such test exists.
Result<bool> CallTest(Interpreter& in, std::string_view name, const Value& input, const CallArgs& args);
// `obj.name`: dict keys, namespace attributes and str/dict/list methods (as bound callables).
// Missing attributes give an undefined value with a hint; only an undefined `obj` is an error.
Result<Value> GetAttr(const Value& obj, std::string_view name);
// `obj[key]`: item first, then attribute, like jinja2's getitem.
Result<Value> GetItem(const Value& obj, const Value& key);
// `item in container`.
Result<bool> Contains(const Value& container, const Value& item);
// range, namespace, dict, joiner, raise_exception, strftime_now.
void AddGlobals(Scope& scope);

// str.splitlines(), used by indent and the method.
std::vector<std::string> SplitLines(std::string_view s);

}  // namespace fak::jinja
