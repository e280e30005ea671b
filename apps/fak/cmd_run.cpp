// fak run: generate from a prompt, streaming text.
#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/fak/commands.h"
#include "apps/fak/model_flags.h"
#include "apps/fak/template_cli.h"
#include "core/npy.h"
#include "engine/generate.h"
#include "engine/session.h"
#include "grammar/json_schema.h"
#include "grammar/vocab.h"
#include "tokenizer/chat_template.h"

namespace fak::cli {
namespace {

bool StreamToStdout(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return true;
}

}  // namespace

Result<std::shared_ptr<grammar::Automaton>> GrammarFromFlags(const std::string& schema_file,
                                                             const std::string& grammar_file,
                                                             const LoadedModel& loaded) {
  if (schema_file.empty() && grammar_file.empty()) return std::shared_ptr<grammar::Automaton>();
  if (!schema_file.empty() && !grammar_file.empty()) {
    return InvalidArgument("give --json-schema or --grammar, not both");
  }
  std::string text;
  if (!schema_file.empty()) {
    FAK_ASSIGN_OR_RETURN(std::string raw, ReadFileToString(schema_file));
    nlohmann::ordered_json schema;
    try {
      schema = nlohmann::ordered_json::parse(raw);
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgument("--json-schema {}: not JSON: {}", schema_file, e.what());
    }
    auto g = grammar::JsonSchemaToGrammar(schema);
    if (!g.ok()) return g.status().WithContext("--json-schema " + schema_file);
    text = *g;
  } else {
    FAK_ASSIGN_OR_RETURN(text, ReadFileToString(grammar_file));
  }
  auto g = grammar::Grammar::Parse(text);
  if (!g.ok())
    return g.status().WithContext(schema_file.empty() ? "--grammar " + grammar_file : "--json-schema");
  auto trie = grammar::BuildTokenTrie(*loaded.tokenizer, loaded.model->config.eos_token_ids);
  return std::make_shared<grammar::Automaton>(std::make_shared<const grammar::Grammar>(std::move(*g)), trie);
}

void RegisterRun(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt");
  static ModelFlags mf;
  static SamplingFlags sf;
  static std::string prompt, prompt_file, dump_logits, schema_file, grammar_file;
  static int64_t n_predict = 128;
  static std::vector<std::string> stop;
  static bool no_special = false, print_ids = false, ignore_eos = false, escapes = false;
  mf.Add(cmd);
  sf.Add(cmd);
  auto* p_opt = cmd->add_option("-p,--prompt", prompt, "Prompt text");
  cmd->add_option("-f,--file", prompt_file, "Read the prompt from a file")->excludes(p_opt);
  cmd->add_flag(
      "-e,--escape", escapes,
      "Process escapes (\\n \\t \\xHH ...) in the prompt; off by default, unlike llama.cpp, so that "
      "a prompt with backslashes (code, paths) is passed as written");
  cmd->add_option("-n,--n-predict", n_predict,
                  "Tokens to generate; -1: until end of sequence or a full context");
  cmd->add_option("--stop", stop, "Stop before this string (repeatable)");
  cmd->add_option("--dump-logits", dump_logits,
                  "Write the logits of every generated position (float32 .npy)");
  cmd->add_flag("--no-special", no_special, "Add no BOS and do not parse special tokens in the prompt");
  cmd->add_flag("--ignore-eos", ignore_eos, "Keep generating past end-of-sequence");
  cmd->add_flag("--print-ids", print_ids, "Print the prompt and generated token ids as JSON on stderr");
  cmd->add_option("--json-schema", schema_file,
                  "Constrain the output to JSON valid against this JSON schema file (docs/grammar.md)");
  cmd->add_option("--grammar", grammar_file, "Constrain the output to this grammar file (docs/grammar.md)");
  cmd->callback([&ctx]() {
    if (!prompt_file.empty()) {
      auto text = ReadFileToString(prompt_file);
      if (!text.ok()) {
        ctx.exit_code = Fail(text.status().ToString());
        return;
      }
      prompt = *text;
    }
    if (escapes) prompt = ProcessEscapes(prompt);
    if (prompt.empty()) {
      ctx.exit_code = UsageError("run: give a prompt with -p TEXT or -f FILE");
      return;
    }
    if (n_predict < -1) {
      ctx.exit_code = UsageError(fmt::format("-n {}: want -1 (until the end) or a count from 0", n_predict));
      return;
    }
    if (Status s = sf.Resolve(); !s.ok()) {
      ctx.exit_code = UsageError(s.message());
      return;
    }
    auto loaded = LoadForRun(mf);
    if (!loaded.ok()) {
      ctx.exit_code = Fail(loaded.status().ToString());
      return;
    }
    if (Status s = sf.CheckVocabulary(loaded->model->config.vocab_size); !s.ok()) {
      ctx.exit_code = UsageError(s.message());
      return;
    }
    auto session = CreateSession(mf, *loaded);
    if (!session.ok()) {
      ctx.exit_code = Fail(session.status().ToString());
      return;
    }
    EncodeOptions eo;
    eo.add_special = !no_special;
    eo.parse_special = !no_special;
    auto ids = loaded->tokenizer->Encode(prompt, eo);
    if (!ids.ok()) {
      ctx.exit_code = Fail(ids.status().ToString());
      return;
    }
    GenerateOptions go;
    go.max_tokens = n_predict < 0 ? INT64_MAX : n_predict;
    go.sampling = sf.p;
    go.stop = stop;
    go.ignore_eos = ignore_eos;
    go.on_text = StreamToStdout;
    go.raw_text = true;  // to the terminal byte for byte, as llama.cpp's CLI writes it
    auto constraint = GrammarFromFlags(schema_file, grammar_file, *loaded);
    if (!constraint.ok()) {
      ctx.exit_code = Fail(constraint.status().ToString());
      return;
    }
    go.grammar = *constraint;
    // The logits file is created before generating, so a bad path fails at once, and each position's
    // row goes straight to disk; an error or a stop before the end leaves no partial file.
    std::unique_ptr<NpyRowWriter> dump;
    if (!dump_logits.empty()) {
      auto w = NpyRowWriter::Create(dump_logits, loaded->model->config.vocab_size);
      if (!w.ok()) {
        ctx.exit_code = Fail("--dump-logits: " + w.status().ToString());
        return;
      }
      dump = std::move(*w);
      go.on_logits = [&dump](std::span<const float> row) { return dump->Append(row); };
    }
    auto r = GenerateFromIds(**session, *loaded->tokenizer, *ids, go);
    if (!r.ok()) {
      ctx.exit_code = Fail(r.status().ToString());
      return;
    }
    std::fputc('\n', stdout);
    PrintTimings(*r);
    if (print_ids) {
      std::fprintf(
          stderr, "%s\n",
          nlohmann::json({{"prompt_ids", r->prompt_ids}, {"output_ids", r->output_ids}}).dump().c_str());
    }
    if (dump) {
      Status s = dump->Finish();
      if (!s.ok()) ctx.exit_code = Fail(s.ToString());
    }
  });
}

}  // namespace fak::cli
