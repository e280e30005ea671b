// Renders every case in tests/fixtures/chat/*.json and compares with Python jinja2's output
// (tools/chat_oracle/render.py), byte for byte.
#include "tokenizer/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/mapped_file.h"

namespace fak {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::time_t kFixedNow = 1721995200;  // the oracle's FIXED_NOW

ojson LoadGroup(const std::string& group) {
  std::string path = "tests/fixtures/chat/" + group + ".json";
  Result<std::string> text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  if (!text.ok()) return ojson();
  return ojson::parse(*text);
}

std::string TemplateOf(const ojson& c) {
  if (c.contains("template")) return c["template"].get<std::string>();
  Result<std::string> text = ReadFileToString(c["template_file"].get<std::string>());
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  if (!text.ok()) return "";
  return ojson::parse(*text)[c["template_key"].get<std::string>()].get<std::string>();
}

Result<std::string> RenderCase(const ChatTemplate& t, const ojson& c) {
  if (c.contains("context")) return t.Render(c["context"]);
  return RenderChat(t, c["messages"], c.value("tools", ojson()), c.value("add_generation_prompt", false),
                    c.value("bos_token", ""), c.value("eos_token", ""), c.value("extra", ojson::object()));
}

class FixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTest, MatchesJinja2ByteForByte) {
  ojson data = LoadGroup(GetParam());
  ASSERT_TRUE(data.contains("cases"));
  ASSERT_GT(data["cases"].size(), 0u);
  for (const ojson& c : data["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    jinja::RenderOptions options;
    options.now = kFixedNow;
    Result<ChatTemplate> t = ChatTemplate::Parse(TemplateOf(c), options);
    std::string error = c.value("error", "");
    if (error == "syntax") {
      ASSERT_FALSE(t.ok()) << name << ": jinja2 rejects this template";
      std::string want = "template:" + std::to_string(c["error_line"].get<int>()) + ":";
      EXPECT_EQ(t.status().message().rfind(want, 0), 0u)
          << t.status().message() << " (want line from jinja2: " << want << ")";
      continue;
    }
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    Result<std::string> out = RenderCase(*t, c);
    if (error == "render") {
      ASSERT_FALSE(out.ok()) << name << ": jinja2 fails with " << c["error_message"] << " but fak rendered "
                             << (out.ok() ? *out : "");
      EXPECT_EQ(out.status().message().rfind("template:", 0), 0u) << out.status().message();
      continue;
    }
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(*out, c["expected"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Chat, FixtureTest,
                         ::testing::Values("syntax", "operators", "access", "string_methods", "filters",
                                           "tests", "control", "errors", "qwen3", "models", "qwen3_random"));

}  // namespace
}  // namespace fak
