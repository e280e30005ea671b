// JSON schemas lowered to grammars: what validates is accepted, what does not is refused, exhaustively
// for integer ranges; unsupported keywords are refused by name.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace fak::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const TokenTrie> Bytes() {
  static auto trie = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    return std::make_shared<const TokenTrie>(pieces, std::vector<int32_t>{});
  }();
  return trie;
}

std::shared_ptr<Automaton> FromSchema(const std::string& schema) {
  auto text = JsonSchemaToGrammar(Json::parse(schema));
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  if (!text.ok()) return nullptr;
  auto g = Grammar::Parse(*text);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << *text;
  if (!g.ok()) return nullptr;
  return std::make_shared<Automaton>(std::make_shared<const Grammar>(std::move(*g)), Bytes());
}

bool Accepts(Automaton& a, std::string_view text) {
  const int32_t s = a.Advance(a.start(), text);
  return s >= 0 && a.Accepting(s);
}

std::string Refusal(const std::string& schema) {
  auto text = JsonSchemaToGrammar(Json::parse(schema));
  return text.ok() ? std::string("(accepted)") : text.status().message();
}

TEST(JsonSchema, ObjectsWithRequiredAndOptionalProperties) {
  auto a = FromSchema(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                          "c": {"type": "boolean"}}, "required": ["b"], "additionalProperties": false})");
  ASSERT_TRUE(a);
  for (const char* ok : {R"({"b": ""})", R"({"a": -12, "b": "x\"y\\n\u00e9"})", R"({"b":"q","c":true})",
                         R"({"a":0,"b":"","c":false})", " {\n  \"b\": \"é\"\n}"}) {
    EXPECT_TRUE(Accepts(*a, ok)) << ok;
  }
  for (const char* bad : {R"({})", R"({"a": 1})", R"({"b": "", "a": 1})", R"({"b": 1})",
                          R"({"b": "", "d": 1})", R"({"a": 01, "b": ""})", R"({"b": "\q"})", R"({"b": "", })",
                          "{\"b\": \"\x01\"}", R"({"b": "\ud800"})"}) {
    EXPECT_FALSE(Accepts(*a, bad)) << bad;
  }
}

TEST(JsonSchema, IntegerRangesExactly) {
  const std::pair<int64_t, int64_t> bounds[] = {{-123, 4567}, {0, 0},    {7, 7},  {10, 99},
                                                {-1000, -10}, {5, 1005}, {-9, 9}, {199, 2000}};
  for (auto [lo, hi] : bounds) {
    auto a = FromSchema(fmt::format(R"({{"type": "integer", "minimum": {}, "maximum": {}}})", lo, hi));
    ASSERT_TRUE(a);
    for (int64_t v = -2100; v <= 6000; ++v) {
      ASSERT_EQ(Accepts(*a, std::to_string(v)), v >= lo && v <= hi)
          << v << " in [" << lo << ", " << hi << "]";
    }
    EXPECT_FALSE(Accepts(*a, "-0"));
    EXPECT_FALSE(Accepts(*a, "007"));
  }
  auto open = FromSchema(R"({"type": "integer", "exclusiveMinimum": 41})");
  for (int64_t v = -100; v <= 100000; v += 7) EXPECT_EQ(Accepts(*open, std::to_string(v)), v > 41) << v;
  EXPECT_TRUE(Accepts(*open, "123456789012345"));
  auto below = FromSchema(R"({"type": "integer", "maximum": -5})");
  for (int64_t v = -100000; v <= 100; v += 7) EXPECT_EQ(Accepts(*below, std::to_string(v)), v <= -5) << v;
}

TEST(JsonSchema, NumbersWithBounds) {
  auto a = FromSchema(R"({"type": "number", "minimum": -2, "exclusiveMaximum": 3})");
  ASSERT_TRUE(a);
  for (const char* ok : {"-2", "-2.0", "-1.999", "0", "0.5", "2.999999", "-0.5", "1"})
    EXPECT_TRUE(Accepts(*a, ok)) << ok;
  for (const char* bad : {"-2.01", "3", "3.0", "3.1", "-3", "10", "1e2", ".5"})
    EXPECT_FALSE(Accepts(*a, bad)) << bad;
  auto pos = FromSchema(R"({"type": "number", "exclusiveMinimum": 0})");
  for (const char* ok : {"0.001", "1", "12.5"}) EXPECT_TRUE(Accepts(*pos, ok)) << ok;
  for (const char* bad : {"0", "0.0", "-1", "-0.5"}) EXPECT_FALSE(Accepts(*pos, bad)) << bad;
  auto free_number = FromSchema(R"({"type": "number"})");
  for (const char* ok : {"0", "-1.5e10", "3.25E-3", "42"}) EXPECT_TRUE(Accepts(*free_number, ok)) << ok;
  for (const char* bad : {"+1", "1.", "01", "1e", "NaN"}) EXPECT_FALSE(Accepts(*free_number, bad)) << bad;
  EXPECT_NE(Refusal(R"({"type": "number", "minimum": 0.5})").find("non-integer 'minimum'"),
            std::string::npos);
}

TEST(JsonSchema, ArraysEnumsAndAlternatives) {
  auto a = FromSchema(R"({"type": "array", "items": {"enum": ["red", 3, null, {"k": [1]}]}, "minItems": 2,
                          "maxItems": 3})");
  ASSERT_TRUE(a);
  EXPECT_TRUE(Accepts(*a, R"(["red", 3])"));
  EXPECT_TRUE(Accepts(*a, R"([null,{"k":[1]},"red"])"));
  EXPECT_FALSE(Accepts(*a, R"(["red"])"));
  EXPECT_FALSE(Accepts(*a, R"(["red", 3, 3, 3])"));
  EXPECT_FALSE(Accepts(*a, R"(["blue", 3])"));
  auto tuple = FromSchema(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
                              "items": false})");
  EXPECT_TRUE(Accepts(*tuple, R"(["a", 1])"));
  EXPECT_TRUE(Accepts(*tuple, R"(["a"])"));
  EXPECT_TRUE(Accepts(*tuple, R"([])"));
  EXPECT_FALSE(Accepts(*tuple, R"(["a", 1, 2])"));
  EXPECT_FALSE(Accepts(*tuple, R"([1])"));
  auto any_of = FromSchema(R"({"anyOf": [{"type": "string", "maxLength": 2}, {"type": "null"},
                                          {"const": "long"}]})");
  for (const char* ok : {R"("")", R"("ab")", "null", R"("long")"}) EXPECT_TRUE(Accepts(*any_of, ok)) << ok;
  for (const char* bad : {R"("abc")", "1", R"("lon")"}) EXPECT_FALSE(Accepts(*any_of, bad)) << bad;
  auto types = FromSchema(R"({"type": ["integer", "null"]})");
  EXPECT_TRUE(Accepts(*types, "null"));
  EXPECT_TRUE(Accepts(*types, "-3"));
  EXPECT_FALSE(Accepts(*types, "1.5"));
}

TEST(JsonSchema, StringsLengthsFormatsAndPatterns) {
  auto len = FromSchema(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  for (const char* ok : {R"("ab")", R"("é\n😀")", R"("\"\\")"}) EXPECT_TRUE(Accepts(*len, ok)) << ok;
  for (const char* bad : {R"("a")", R"("abcd")"}) EXPECT_FALSE(Accepts(*len, bad)) << bad;
  auto date = FromSchema(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(Accepts(*date, R"("2026-12-03T10:39:51Z")"));
  EXPECT_TRUE(Accepts(*date, R"("2026-01-31T23:59:59.123+01:00")"));
  EXPECT_FALSE(Accepts(*date, R"("2026-13-03T10:39:51Z")"));
  EXPECT_FALSE(Accepts(*date, R"("2026-02-30T10:39:51Z")"));
  EXPECT_FALSE(Accepts(*date, R"("2026-04-31T10:39:51Z")"));
  EXPECT_FALSE(Accepts(*date, R"("0000-01-01T10:39:51Z")"));
  auto pat = FromSchema(R"({"type": "string", "pattern": "^[a-z]{3}-\\d+(\\.[0-9]{2})?$"})");
  for (const char* ok : {R"("abc-1")", R"("xyz-2024.05")"}) EXPECT_TRUE(Accepts(*pat, ok)) << ok;
  for (const char* bad : {R"("ab-1")", R"("abc-")", R"("abc-1.5")", R"(" abc-1")"}) {
    EXPECT_FALSE(Accepts(*pat, bad)) << bad;
  }
  auto contains = FromSchema(R"({"type": "string", "pattern": "q\"[^a]"})");  // unanchored: a search
  EXPECT_TRUE(Accepts(*contains, R"("xxq\"bxx")"));
  EXPECT_TRUE(Accepts(*contains, R"("q\"\\")"));
  EXPECT_FALSE(Accepts(*contains, R"("xxq\"axx")"));
}

TEST(JsonSchema, RefsAndRecursion) {
  auto a = FromSchema(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
      "required": ["v", "next"]}}})");
  ASSERT_TRUE(a);
  EXPECT_TRUE(Accepts(*a, R"({"v": 1, "next": {"v": 2, "next": null}})"));
  EXPECT_FALSE(Accepts(*a, R"({"v": 1, "next": {"v": 2}})"));
  auto map = FromSchema(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(Accepts(*map, R"({"any": 1, "keys": 2})"));
  EXPECT_TRUE(Accepts(*map, R"({})"));
  EXPECT_FALSE(Accepts(*map, R"({"a": "b"})"));
  auto any = FromSchema(R"({})");
  EXPECT_TRUE(Accepts(*any, R"([1, {"a": [null, true]}, "x", -2.5e3])"));
  EXPECT_FALSE(Accepts(*any, R"([1,])"));
}

TEST(JsonSchema, UnsupportedFeaturesAreNamed) {
  EXPECT_NE(Refusal(R"({"type": "array", "uniqueItems": true})").find("'uniqueItems' is not supported"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"type": "string", "format": "email"})").find("format 'email' is not supported"),
            std::string::npos);
  EXPECT_NE(
      Refusal(R"({"allOf": [{"type": "string"}, {"maxLength": 2}]})").find("'allOf' with more than one"),
      std::string::npos);
  EXPECT_NE(Refusal(R"({"type": "string", "pattern": "(a)\\1"})").find("backreferences"), std::string::npos);
  EXPECT_NE(
      Refusal(R"({"type": "object", "properties": {"x": {"type": "strin"}}})").find("'#/properties/x/type'"),
      std::string::npos);
  EXPECT_NE(Refusal(R"({"$ref": "https://example.com/s.json"})").find("is not supported"), std::string::npos);
  EXPECT_NE(Refusal(R"({"type": "integer", "minimum": 5, "maximum": 4})").find("no integer"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"type": "integer", "multipleOf": 2})").find("'multipleOf' is not supported"),
            std::string::npos);
  EXPECT_NE(Refusal("false").find("matches nothing"), std::string::npos);
  std::string deep = R"({"type": "string"})";
  for (int i = 0; i < 200; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_NE(Refusal(deep).find("nests deeper than 64 levels"), std::string::npos);
}

TEST(JsonSchema, JsonObjectMode) {
  auto g = Grammar::Parse(JsonObjectGrammar());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Automaton a(std::make_shared<const Grammar>(std::move(*g)), Bytes());
  EXPECT_TRUE(Accepts(a, R"({"a": [1, 2, {"b": null}], "c": "d"})"));
  EXPECT_FALSE(Accepts(a, R"([1])"));
  EXPECT_FALSE(Accepts(a, R"({"a" 1})"));
}

}  // namespace
}  // namespace fak::grammar
