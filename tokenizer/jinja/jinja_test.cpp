// Unit tests of the Jinja subset: error positions, limits against hostile templates, Python value
// formatting and string semantics. Rendering fidelity is covered by chat_template_test's fixtures.
#include <gtest/gtest.h>

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser.h"
#include "tokenizer/jinja/py_string.h"
#include "tokenizer/jinja/value.h"

namespace fak::jinja {
namespace {

Result<std::string> RenderText(const std::string& src, const Value& ctx = Value::MakeDict(),
                               RenderOptions options = {}) {
  FAK_ASSIGN_OR_RETURN(Template t, ParseTemplate(src));
  Interpreter in(options);
  return in.Render(t, ctx);
}

std::string ErrorOf(const std::string& src) {
  Result<std::string> r = RenderText(src);
  EXPECT_FALSE(r.ok()) << "rendered: " << (r.ok() ? *r : "");
  return r.ok() ? "" : r.status().message();
}

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(ErrorOf("ok\n{{ 1 + }}"), "template:2:8: unexpected end of print statement '}}'");
  EXPECT_EQ(ErrorOf("a\n  {% frob %}"), "template:2:6: unknown tag 'frob'");
  EXPECT_EQ(ErrorOf("{{ 'abc }}"), "template:1:4: unterminated string literal");
  EXPECT_EQ(ErrorOf("x\n{# open"), "template:2:1: missing end of comment tag");
  EXPECT_EQ(ErrorOf("{{ (1, 2 }}"), "template:1:10: unexpected '}', expected ')'");
  EXPECT_EQ(ErrorOf("{{ a ? b }}"), "template:1:6: unexpected character '?'");
  EXPECT_EQ(ErrorOf("{% break %}"), "template:1:4: 'break' outside of a loop");
  EXPECT_EQ(ErrorOf("{% include 'x' %}"),
            "template:1:4: tag 'include' is not supported (templates are self-contained)");
  std::string unclosed = ErrorOf("{% for x in y %}\n{% if x %}\n");
  EXPECT_NE(unclosed.find("expected 'elif' or 'else' or 'endif'"), std::string::npos) << unclosed;
}

TEST(JinjaErrors, RenderErrorsNameTheNode) {
  EXPECT_EQ(ErrorOf("\n  {{ raise_exception('bad role') }}"), "template:2:6: raise_exception: bad role");
  EXPECT_EQ(ErrorOf("{{ missing.attr }}"), "template:1:4: 'missing' is undefined");
  EXPECT_EQ(ErrorOf("{{ 'a' + 1 }}"), "template:1:8: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(ErrorOf("{{ [1].append(2) }}"),
            "template:1:4: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(ErrorOf("{{ x | nosuch }}"), "template:1:6: no filter named 'nosuch'");
  EXPECT_EQ(ErrorOf("{{ x is nosuch }}"), "template:1:6: no test named 'nosuch'");
  EXPECT_EQ(ErrorOf("{% for a, b in [1] %}{% endfor %}"), "template:1:4: cannot unpack int");
  EXPECT_EQ(ErrorOf("{{ 9223372036854775807 + 1 }}"), "template:1:24: integer overflow in '+'");
}

TEST(JinjaLimits, InfiniteLikeLoopsStop) {
  RenderOptions o;
  o.limits.max_loop_iterations = 10000;
  Result<std::string> r = RenderText("{% for i in range(100000) %}{% endfor %}", Value::MakeDict(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("iterations"), std::string::npos) << r.status().message();
  r = RenderText("{% for i in range(200) %}{% for j in range(200) %}{% endfor %}{% endfor %}",
                 Value::MakeDict(), o);
  EXPECT_FALSE(r.ok());
  r = RenderText("{{ range(9223372036854775807) | length }}", Value::MakeDict(), o);
  EXPECT_FALSE(r.ok());
}

TEST(JinjaLimits, RunawayRecursionStops) {
  Result<std::string> r = RenderText("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nests deeper"), std::string::npos) << r.status().message();
}

TEST(JinjaLimits, OutputSizeIsBounded) {
  RenderOptions o;
  o.limits.max_output_bytes = 1 << 20;
  Result<std::string> r = RenderText("{{ 'x' * 100000000 }}", Value::MakeDict(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("exceeds the limit"), std::string::npos);
  r = RenderText(
      "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
      Value::MakeDict(), o);
  EXPECT_FALSE(r.ok());
  r = RenderText("{% for i in range(100000) %}0123456789abcdef{% endfor %}", Value::MakeDict(), o);
  EXPECT_FALSE(r.ok());
}

// A namespace given a value that holds the namespace itself would be a reference cycle, which
// reference counting never frees (a fuzzer found `{% set ns.n = ns %}` leaking): refused by name.
TEST(JinjaLimits, ReferenceCyclesAreRefused) {
  for (const char* t : {"{% set ns = namespace(n=0) %}{% set ns.n = ns %}",
                        "{% set ns = namespace(n=0) %}{% set ns.n = [1, {'a': [ns]}] %}",
                        "{% set a = namespace(x=1) %}{% set b = namespace(y=a) %}{% set a.x = b %}"}) {
    SCOPED_TRACE(t);
    Result<std::string> r = RenderText(t);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("reference cycle"), std::string::npos) << r.status().message();
  }
  // Values that only share a namespace, without a loop, stay allowed.
  Result<std::string> ok = RenderText(
      "{% set a = namespace(x=1) %}{% set b = namespace(y=a, z=a) %}{% set b.w = [a, a] %}{{ b.w[1].x }}");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, "1");
}

TEST(JinjaLimits, DeepNestingIsRejectedNotRecursed) {
  std::string deep = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  Result<Template> t = ParseTemplate(deep);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("nests deeper"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_FALSE(ParseTemplate(ifs).ok());
  std::string nots = "{{ " + std::string(0, ' ');
  for (int i = 0; i < 100000; ++i) nots += "not ";
  EXPECT_FALSE(ParseTemplate(nots + "1 }}").ok());
}

TEST(JinjaLimits, GarbageNeverCrashes) {
  // A cheap fuzz: every prefix of a real template and a byte-mutated copy must parse or fail cleanly.
  std::string src =
      "{%- set ns = namespace(a=1) %}{% for m in messages if m.role != 'x' %}{{ m.content | trim ~ "
      "loop.index }}"
      "{% if not loop.last %}, {% endif %}{% else %}{{ raise_exception('none') }}{% endfor %}{{ ns.a }}";
  Value ctx = Value::MakeDict();
  ctx.dict().Set("messages", Value::MakeList({Value::MakeDict()}));
  for (size_t n = 0; n <= src.size(); ++n) {
    Result<std::string> r = RenderText(src.substr(0, n), ctx);
    (void)r;
  }
  uint32_t seed = 12345;
  for (int round = 0; round < 2000; ++round) {
    std::string m = src;
    for (int k = 0; k < 3; ++k) {
      seed = seed * 1664525u + 1013904223u;
      m[(seed >> 8) % m.size()] = static_cast<char>("{}%#-+()[]'\"|.,=~ a1\n\\"[(seed >> 20) % 22]);
    }
    Result<std::string> r = RenderText(m, ctx);
    (void)r;
  }
  SUCCEED();
}

TEST(JinjaValues, PythonSpellings) {
  EXPECT_EQ(FloatRepr(0.1), "0.1");
  EXPECT_EQ(FloatRepr(1e16), "1e+16");
  EXPECT_EQ(FloatRepr(1e15), "1000000000000000.0");
  EXPECT_EQ(FloatRepr(1e-5), "1e-05");
  EXPECT_EQ(FloatRepr(0.0001), "0.0001");
  EXPECT_EQ(FloatRepr(-2.5e-300), "-2.5e-300");
  EXPECT_EQ(FloatRepr(123.0), "123.0");
  EXPECT_EQ(StringRepr("it's"), "\"it's\"");
  EXPECT_EQ(StringRepr("a'b\"c"), "'a\\'b\"c'");
  EXPECT_EQ(StringRepr("\x01\n\xc2\xa0"), "'\\x01\\n\\xa0'");
  Value d = Value::MakeDict();
  d.dict().Set("b", Value(1));
  d.dict().Set("a", Value::MakeList({Value(true), Value::None(), Value(1.5)}));
  EXPECT_EQ(d.ToString(), "{'b': 1, 'a': [True, None, 1.5]}");
  Result<std::string> j = ToJson(d, {});
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(*j, "{\"b\": 1, \"a\": [true, null, 1.5]}");
}

TEST(JinjaValues, EqualityFollowsPython) {
  EXPECT_TRUE(Equals(Value(1), Value(1.0)));
  EXPECT_TRUE(Equals(Value(true), Value(1)));
  EXPECT_FALSE(Equals(Value("1"), Value(1)));
  EXPECT_FALSE(Equals(Value::MakeList({Value(1)}, true), Value::MakeList({Value(1)})));
  EXPECT_FALSE(Less(Value("a"), Value(1)).ok());
}

TEST(JinjaStrings, CodepointSemantics) {
  EXPECT_EQ(CodepointCount("h\xc3\xa9llo"), 5u);
  EXPECT_EQ(PyStrip("\xe3\x80\x80 x\xc2\xa0", std::nullopt, true, true), "x");
  EXPECT_EQ(PySplit(" a  b ", std::nullopt, -1), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(PyRSplit("a,b,c", std::string(","), 1), (std::vector<std::string>{"a,b", "c"}));
  EXPECT_EQ(PyTitle("hello wORLD"), "Hello World");
  // Invalid UTF-8 survives a round trip unchanged.
  std::string bad = "a\xff\xc3(b";
  EXPECT_EQ(EncodeUtf8(DecodeUtf8(bad)), bad);
  EXPECT_EQ(SliceIndices(5, std::nullopt, std::nullopt, -1), (std::vector<int64_t>{4, 3, 2, 1, 0}));
  EXPECT_EQ(SliceIndices(5, -2, std::nullopt, 1), (std::vector<int64_t>{3, 4}));
}

TEST(JinjaLexer, WhitespaceControl) {
  Result<std::vector<Token>> t = Tokenize("  {%- if x -%}  \n  y\n");
  ASSERT_TRUE(t.ok());
  ASSERT_EQ((*t)[0].type, TokenType::kBlockBegin);
  // The trailing newline of the template is dropped, leading whitespace after -%} too.
  EXPECT_EQ(t->back().type, TokenType::kEof);
  EXPECT_EQ((*t)[t->size() - 2].text, "y");
}

}  // namespace
}  // namespace fak::jinja
