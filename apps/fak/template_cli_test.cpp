// `fak template`: models given as a GGUF file or a directory with tokenizer_config.json.
#include "apps/fak/template_cli.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "formats/gguf_writer.h"

namespace fak {
namespace {

namespace fs = std::filesystem;

class TemplateCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fak_template_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

constexpr const char* kChatMl =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

TEST_F(TemplateCliTest, RendersQwen3FromTokenizerConfigDirectory) {
  TemplateOptions o;
  o.model_path = "../shared/fixtures/tokenizers/qwen3";
  o.messages_path = Write("m.json",
                          R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true,
                              "enable_thinking": false})");
  std::ostringstream out;
  Status s = RunTemplate(o, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out.str(), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST_F(TemplateCliTest, RendersFromGgufMetadata) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("tokenizer.chat_template", "{{ bos_token }}" + std::string(kChatMl) + "{{ eos_token }}");
  w.SetStringArray("tokenizer.ggml.tokens", {"<s>", "</s>", "a"});
  w.SetUint32("tokenizer.ggml.bos_token_id", 0);
  w.SetUint32("tokenizer.ggml.eos_token_id", 1);
  std::string gguf = (dir_ / "m.gguf").string();
  ASSERT_TRUE(w.Write(gguf).ok());
  TemplateOptions o;
  o.model_path = gguf;
  o.messages_path = Write("m.json", R"([{"role": "user", "content": "Hi"}])");
  o.add_generation_prompt = true;
  std::ostringstream out;
  Status s = RunTemplate(o, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out.str(), "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n</s>");
}

TEST_F(TemplateCliTest, NamedTemplatesAndTemplateFile) {
  Write(
      "tokenizer_config.json",
      R"({"eos_token": {"content": "</s>"}, "chat_template": [{"name": "default", "template": "D{{ eos_token }}"},
            {"name": "tool_use", "template": "T"}]})");
  TemplateOptions o;
  o.model_path = dir_.string();
  o.messages_path = Write("m.json", "[]");
  std::ostringstream out;
  ASSERT_TRUE(RunTemplate(o, out).ok());
  EXPECT_EQ(out.str(), "D</s>");
  o.template_name = "tool_use";
  std::ostringstream out2;
  ASSERT_TRUE(RunTemplate(o, out2).ok());
  EXPECT_EQ(out2.str(), "T");
  Write("chat_template.jinja", "J\n");
  o.template_name = "";
  std::ostringstream out3;
  ASSERT_TRUE(RunTemplate(o, out3).ok());
  EXPECT_EQ(out3.str(), "J");
  // A named template is still the named one when chat_template.jinja holds the default.
  std::ostringstream out4;
  o.template_name = "tool_use";
  ASSERT_TRUE(RunTemplate(o, out4).ok());
  EXPECT_EQ(out4.str(), "T");
  // Unknown names are refused with the names there are (hardening item 12).
  o.template_name = "rag";
  Status s = RunTemplate(o, out4);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("no chat template named 'rag' (it has: default, tool_use)"), std::string::npos)
      << s.message();
  fs::remove(dir_ / "chat_template.jinja");
  Write("tokenizer_config.json", R"({"chat_template": "X"})");
  s = RunTemplate(o, out4);
  EXPECT_NE(s.message().find("one unnamed chat template, none named 'rag'"), std::string::npos)
      << s.message();
}

TEST_F(TemplateCliTest, NamedTemplatesInGguf) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("tokenizer.chat_template", "D");
  w.SetString("tokenizer.chat_template.tool_use", "T");
  std::string gguf = (dir_ / "m.gguf").string();
  ASSERT_TRUE(w.Write(gguf).ok());
  TemplateOptions o;
  o.model_path = gguf;
  o.messages_path = Write("m.json", "[]");
  std::ostringstream out, out2;
  ASSERT_TRUE(RunTemplate(o, out).ok());
  EXPECT_EQ(out.str(), "D");
  o.template_name = "tool_use";
  ASSERT_TRUE(RunTemplate(o, out2).ok());
  EXPECT_EQ(out2.str(), "T");
  o.template_name = "rag";
  Status s = RunTemplate(o, out2);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("no chat template named 'rag' (it has: tool_use)"), std::string::npos)
      << s.message();
}

TEST_F(TemplateCliTest, BadInputGivesClearErrors) {
  TemplateOptions o;
  o.model_path = dir_.string();
  o.messages_path = Write("m.json", "[]");
  std::ostringstream out;
  Status s = RunTemplate(o, out);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();

  Write("tokenizer_config.json", R"({"chat_template": "line one\n{% if x %}oops"})");
  s = RunTemplate(o, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("template:2:"), std::string::npos) << s.message();

  Write("tokenizer_config.json", R"({"chat_template": "{{ messages[0].content }}"})");
  o.messages_path = Write("bad.json", "{\"messages\": [1, 2]");
  s = RunTemplate(o, out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  o.messages_path = Write("bad2.json", R"({"messages": [1]})");
  s = RunTemplate(o, out);
  EXPECT_NE(s.message().find("messages[0] is not an object"), std::string::npos) << s.ToString();
  o.messages_path = Write("bad3.json", R"({"tools": []})");
  s = RunTemplate(o, out);
  EXPECT_NE(s.message().find("no 'messages'"), std::string::npos) << s.ToString();
  o.model_path = (dir_ / "nope.gguf").string();
  s = RunTemplate(o, out);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  o.model_path = Write("junk.gguf", "not a gguf file at all");
  o.messages_path = Write("ok.json", "[]");
  s = RunTemplate(o, out);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(out.str().empty());
}

}  // namespace
}  // namespace fak
