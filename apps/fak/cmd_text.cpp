// fak tokenize and fak template: thin wrappers over the tokenizer library's CLI functions.
#include <iostream>

#include "apps/fak/commands.h"
#include "apps/fak/template_cli.h"
#include "apps/fak/tokenize_cli.h"

namespace fak::cli {

void RegisterTokenize(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("tokenize", "Encode text with a model's tokenizer");
  static TokenizeOptions o;
  cmd->add_option("-m,--model", o.model, "GGUF file, tokenizer.json, tokenizer.model or model folder")
      ->required();
  cmd->add_option("-f,--file", o.file, "Read the text from this file");
  cmd->add_option("text", o.text, "Text to encode");
  cmd->add_flag("--ids", o.ids_only, "Print a JSON array of ids only");
  cmd->add_flag("--no-special", o.no_special, "Add no BOS/EOS and treat special-token text as text");
  cmd->callback([&ctx]() {
    if (o.file.empty() && o.text.empty()) {
      ctx.exit_code = Fail("tokenize: give TEXT or -f FILE");
      return;
    }
    Status s = RunTokenize(o, std::cout);
    if (!s.ok()) ctx.exit_code = Fail(s.ToString());
  });
}

void RegisterTemplate(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("template", "Render a model's chat template over messages.json");
  static TemplateOptions o;
  static bool gen = false, no_gen = false;
  cmd->add_option("-m,--model", o.model_path, "GGUF file or model folder with tokenizer_config.json")
      ->required();
  cmd->add_option("-f,--file", o.messages_path,
                  "messages.json: an array of messages or {messages, tools, ...}")
      ->required();
  cmd->add_option("--template-name", o.template_name, "Named template (tool_use, ...)");
  auto* add = cmd->add_flag("--add-generation-prompt", gen, "End with the assistant turn's opening");
  cmd->add_flag("--no-generation-prompt", no_gen, "Do not open an assistant turn")->excludes(add);
  cmd->callback([&ctx]() {
    if (gen) o.add_generation_prompt = true;
    if (no_gen) o.add_generation_prompt = false;
    Status s = RunTemplate(o, std::cout);
    std::cout.flush();
    if (!s.ok()) ctx.exit_code = Fail(s.ToString());
  });
}

}  // namespace fak::cli
