// Tool-call syntax: parsing whole and streamed replies per format, and the grammars that force calls.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace fak::server {
namespace {

const std::vector<std::string> kNames = {"get_weather", "get_time"};

std::string Stream(ToolCallParser& p, const std::string& text, size_t piece, std::vector<ToolCall>* calls) {
  std::string out;
  for (size_t i = 0; i < text.size(); i += piece) out += p.Push(text.substr(i, piece));
  return out + p.Finish(calls);
}

TEST(ToolCalls, HermesCallsAfterTextWholeOrStreamedByteByByte) {
  const std::string reply =
      "Let me check. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"JST\"}}\n</tool_call>";
  for (size_t piece : {size_t{1}, size_t{3}, reply.size()}) {
    ToolCallParser p(ToolFormat::kHermes, kNames);
    std::vector<ToolCall> calls;
    EXPECT_EQ(Stream(p, reply, piece, &calls), "Let me check. ");
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0].name, "get_weather");
    EXPECT_EQ(calls[0].arguments, R"({"city":"Paris"})");
    EXPECT_EQ(calls[1].name, "get_time");
    EXPECT_TRUE(calls[0].id.rfind("call_", 0) == 0 && calls[0].id != calls[1].id);
  }
}

TEST(ToolCalls, TextThatOnlyLooksLikeACallIsContent) {
  for (const std::string reply : {
           std::string(
               "a <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": }</tool_call>"),  // bad
                                                                                                     // JSON
           std::string("a <tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>"),  // unknown
           std::string("a <tool_call>{\"name\": \"get_time\"} trailing</tool_call> more"),    // text after
           std::string("a <tool_ca"),                                                         // a prefix
       }) {
    ToolCallParser p(ToolFormat::kHermes, kNames);
    std::vector<ToolCall> calls;
    EXPECT_EQ(Stream(p, reply, 2, &calls), reply);
    EXPECT_TRUE(calls.empty()) << reply;
  }
}

TEST(ToolCalls, Llama3JsonReplyAndMistralList) {
  {
    ToolCallParser p(ToolFormat::kLlama3, kNames);
    std::vector<ToolCall> calls;
    EXPECT_EQ(Stream(p, " {\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}", 4, &calls), "");
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].arguments, R"({"tz":"UTC"})");
  }
  {
    ToolCallParser p(ToolFormat::kLlama3, kNames);
    std::vector<ToolCall> calls;
    EXPECT_EQ(Stream(p, "Hello {\"name\": \"get_time\"}", 1, &calls), "Hello {\"name\": \"get_time\"}");
    EXPECT_TRUE(calls.empty());
  }
  {
    ToolCallParser p(ToolFormat::kMistral, kNames);
    std::vector<ToolCall> calls;
    EXPECT_EQ(Stream(p,
                     "[TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}, "
                     "{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}]",
                     5, &calls),
              "");
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[1].arguments, R"({"city":"Oslo"})");  // arguments given as a JSON string
  }
}

bool Matches(const std::string& grammar_text, const std::string& text) {
  auto g = grammar::Grammar::Parse(grammar_text);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << grammar_text;
  if (!g.ok()) return false;
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
  grammar::Automaton a(std::make_shared<const grammar::Grammar>(std::move(*g)),
                       std::make_shared<grammar::TokenTrie>(pieces, std::vector<int32_t>{}));
  const int32_t s = a.Advance(a.start(), text);
  return s >= 0 && a.Accepting(s);
}

TEST(ToolCalls, ForcedAndLazyGrammarsFollowTheFormatAndTheSchemas) {
  std::vector<ToolSpec> tools = {
      {"get_weather",
       nlohmann::ordered_json::parse(
           R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})")},
      {"get_time", nlohmann::ordered_json::parse(R"({"type": "object"})")}};
  auto hermes = ForcedCallGrammar(ToolFormat::kHermes, tools, -1, true);
  ASSERT_TRUE(hermes.ok()) << hermes.status().ToString();
  const std::string w =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const std::string t = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(Matches(*hermes, w));
  EXPECT_TRUE(Matches(*hermes, w + "\n" + t));
  EXPECT_FALSE(Matches(*hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  auto one = ForcedCallGrammar(ToolFormat::kHermes, tools, 1, false);
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(Matches(*one, t));
  EXPECT_FALSE(Matches(*one, w));
  EXPECT_FALSE(Matches(*one, t + "\n" + t));
  auto llama = ForcedCallGrammar(ToolFormat::kLlama3, tools, -1, true);
  ASSERT_TRUE(llama.ok());
  EXPECT_TRUE(Matches(*llama, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"x\"}}"));
  auto mistral = ForcedCallGrammar(ToolFormat::kMistral, tools, -1, true);
  ASSERT_TRUE(mistral.ok());
  EXPECT_TRUE(Matches(*mistral,
                      "[TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": "
                      "\"get_weather\", \"arguments\": {\"city\": \"\"}}]"));
  auto lazy = AutoCallGrammar(ToolFormat::kHermes, tools, true);
  ASSERT_TRUE(lazy.ok());
  EXPECT_EQ(lazy->trigger, "<tool_call>");
  EXPECT_TRUE(Matches(lazy->grammar, w.substr(lazy->trigger.size()) + "\n" + t));
  std::vector<ToolSpec> bad = {{"f", nlohmann::ordered_json::parse(R"({"type": "object", "not": {}})")}};
  auto refused = ForcedCallGrammar(ToolFormat::kHermes, bad, -1, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("tool 'f' parameters"), std::string::npos);
  EXPECT_NE(refused.status().message().find("'not' is not supported"), std::string::npos);
}

TEST(ToolCalls, FormatFromTheTemplate) {
  EXPECT_EQ(DetectToolFormat("{{ '<tool_call>\\n' }}"), ToolFormat::kHermes);
  EXPECT_EQ(DetectToolFormat("{{ '[TOOL_CALLS] ' }}"), ToolFormat::kMistral);
  EXPECT_EQ(DetectToolFormat("{{ '<|python_tag|>' }}"), ToolFormat::kLlama3);
}

}  // namespace
}  // namespace fak::server

namespace fak::server {
namespace {

TEST(ToolCalls, ACutOffLastCallIsDroppedWhenTruncated) {
  const std::string reply =
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\" :\n    \"The "
      "\"}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"get_t";
  ToolCallParser p(ToolFormat::kHermes, kNames);
  std::vector<ToolCall> calls;
  EXPECT_EQ(p.Push(reply), "");
  EXPECT_EQ(p.Finish(&calls, /*truncated=*/true), "");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].arguments, R"({"tz":"The "})");
  ToolCallParser q(ToolFormat::kHermes, kNames);
  q.Push(reply);
  EXPECT_EQ(q.Finish(&calls, /*truncated=*/false), reply);  // not cut by the limit: malformed
  EXPECT_TRUE(calls.empty());
}

}  // namespace
}  // namespace fak::server
