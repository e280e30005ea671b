// Global functions: jinja2's range, namespace, dict and joiner, plus the two transformers adds for
// chat templates, raise_exception(message) and strftime_now(format).
#include <ctime>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/interpreter.h"

namespace fak::jinja {

namespace {

Result<Value> Range(Interpreter& in, const CallArgs& a) {
  if (!a.keyword.empty()) return InvalidArgument("range() takes no keyword arguments");
  if (a.positional.empty() || a.positional.size() > 3) {
    return InvalidArgument("range expected 1 to 3 arguments, got {}", a.positional.size());
  }
  for (const Value& v : a.positional) {
    if (!v.is_int() && !v.is_bool())
      return InvalidArgument("'{}' object cannot be interpreted as an integer", v.TypeName());
  }
  int64_t start = 0, stop = 0, step = 1;
  if (a.positional.size() == 1) {
    stop = a.positional[0].as_int();
  } else {
    start = a.positional[0].as_int();
    stop = a.positional[1].as_int();
    if (a.positional.size() == 3) step = a.positional[2].as_int();
  }
  if (step == 0) return InvalidArgument("range() arg 3 must not be zero");
  // Count first so that a huge range is refused before anything is allocated.
  __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  __int128 mag = step > 0 ? step : -static_cast<__int128>(step);
  int64_t count = span <= 0 ? 0 : static_cast<int64_t>((span + mag - 1) / mag);
  FAK_RETURN_IF_ERROR(in.CountIterations(count));
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) items.emplace_back(start + i * step);
  return Value::MakeList(std::move(items));
}

// namespace(...) and dict(...): a mapping from an optional positional mapping plus keywords.
Result<Value> MakeMapping(const CallArgs& a, bool is_namespace) {
  Value d = Value::MakeDict();
  d.dict().is_namespace = is_namespace;
  if (a.positional.size() > 1) return InvalidArgument("expected at most 1 positional argument");
  if (!a.positional.empty()) {
    const Value& src = a.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict().items) d.dict().Set(k, v);
    } else if (src.is_list()) {
      for (const Value& pair : src.list().items) {
        if (!pair.is_list() || pair.list().items.size() != 2 || !pair.list().items[0].is_string()) {
          return InvalidArgument("dictionary update sequence elements must be (str, value) pairs");
        }
        d.dict().Set(pair.list().items[0].str(), pair.list().items[1]);
      }
    } else {
      return InvalidArgument("'{}' object is not a mapping", src.TypeName());
    }
  }
  for (const auto& [k, v] : a.keyword) d.dict().Set(k, v);
  return d;
}

}  // namespace

void AddGlobals(Scope& scope) {
  scope.Set("range", Value::MakeFunction("range", Range));
  scope.Set("namespace", Value::MakeFunction("namespace", [](Interpreter&, const CallArgs& a) {
              return MakeMapping(a, true);
            }));
  scope.Set("dict", Value::MakeFunction(
                        "dict", [](Interpreter&, const CallArgs& a) { return MakeMapping(a, false); }));
  scope.Set("joiner", Value::MakeFunction("joiner", [](Interpreter&, const CallArgs& a) -> Result<Value> {
              const Value* sep = a.Get(0, "sep");
              std::string text = sep ? sep->ToString() : ", ";
              auto used = std::make_shared<bool>(false);
              return Value::MakeFunction("joiner",
                                         [text, used](Interpreter&, const CallArgs&) -> Result<Value> {
                                           if (!*used) {
                                             *used = true;
                                             return Value("");
                                           }
                                           return Value(text);
                                         });
            }));
  scope.Set("raise_exception",
            Value::MakeFunction("raise_exception", [](Interpreter&, const CallArgs& a) -> Result<Value> {
              const Value* msg = a.Get(0, "message");
              return InvalidArgument("raise_exception: {}", msg ? msg->ToString() : "");
            }));
  scope.Set("strftime_now",
            Value::MakeFunction("strftime_now", [](Interpreter& in, const CallArgs& a) -> Result<Value> {
              const Value* f = a.Get(0, "format");
              if (!f || !f->is_string()) return InvalidArgument("strftime_now needs a format string");
              std::time_t now = in.options().now ? *in.options().now : std::time(nullptr);
              std::tm tm{};
              localtime_r(&now, &tm);
              char buf[512];
              size_t n = std::strftime(buf, sizeof(buf), f->str().c_str(), &tm);
              if (n == 0 && !f->str().empty())
                return InvalidArgument("strftime_now: format '{}' is too long or empty", f->str());
              return Value(std::string(buf, n));
            }));
}

}  // namespace fak::jinja
