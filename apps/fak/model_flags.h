// Flags shared by the commands that load a model (run, chat, bench): model path, weight format,
// threads, context, tokenizer override; and what they load.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/generate.h"  // GenerateResult
#include "engine/model.h"
#include "engine/runtime.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "grammar/matcher.h"
#include "ops/backend.h"
#include "tokenizer/tokenizer.h"

namespace fak::cli {

struct ModelFlags {
  std::string model;
  std::string tokenizer;  // defaults to the model's own
  std::string quant = "keep";
  int threads = 0;  // 0: FAK_THREADS or every CPU
  int64_t ctx = 0;  // -c/--ctx-size; 0: the model's trained context, at most kDefaultContext
  bool mmap = false;
  std::string kv_type = "f16";  // KV cache element type: f16 or f32
  std::string backend = "cpu";
  bool check_finite = false;  // --check-finite: name the first layer whose output is not finite

  void Add(CLI::App* cmd);
};

constexpr int64_t kDefaultContext = 4096;

struct LoadedModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Runtime> runtime;  // made by CreateRuntime / CreateSession
};

// The context -c asks for: its value, or for 0 the model's trained context capped at kDefaultContext.
// Warns on stderr when an explicit value exceeds the trained context (positions past it were never
// seen in training; quality usually falls off there).
int64_t ContextFor(const ModelFlags& flags, const Model& model);

// Runtime options from the flags (context, KV cache type); fails on an unknown --kv-type.
Result<RuntimeOptions> RuntimeOptionsFor(const ModelFlags& flags, const Model& model,
                                         int64_t min_context = 0);

// Loads model and tokenizer and checks they agree (the tokenizer may not be larger than the vocabulary).
Result<LoadedModel> LoadForRun(const ModelFlags& flags, bool need_tokenizer = true);

// Makes loaded.runtime with the flags' options (room for max_sequences sequences of the context).
Status CreateRuntime(const ModelFlags& flags, LoadedModel& loaded, int64_t min_context = 0,
                     int64_t max_sequences = 1);
// CreateRuntime, then one session over it.
Result<std::unique_ptr<Session>> CreateSession(const ModelFlags& flags, LoadedModel& loaded,
                                               int64_t min_context = 0);

// --json-schema FILE / --grammar FILE as an automaton over the loaded model's vocabulary (null when
// neither is given). Defined in cmd_run.cpp.
Result<std::shared_ptr<grammar::Automaton>> GrammarFromFlags(const std::string& schema_file,
                                                             const std::string& grammar_file,
                                                             const LoadedModel& loaded);

struct SamplingFlags {
  SamplingParams p;
  std::string seed = "-1";              // "-1": a random seed, printed so the run can be repeated
  std::vector<std::string> logit_bias;  // "ID+BIAS", "ID-BIAS", "ID-inf"
  void Add(CLI::App* cmd);
  // Reads --seed (-1 or 0..2^64-1, nothing else) into p.seed, drawing and printing a random one for
  // -1 when the sampling uses it, and --logit-bias into p.logit_bias; an error names the flag and
  // the value.
  Status Resolve();
  // Fails when a --logit-bias token is outside the model's vocabulary.
  Status CheckVocabulary(int64_t vocab_size) const;
};

// llama.cpp's escape sequences in a prompt (-e): \n \r \t \' \" \\ \a \b \f \v \? \xHH;
// any other backslash stays as written.
std::string ProcessEscapes(const std::string& text);

// The timing line after a generation (run, chat), on stderr.
void PrintTimings(const GenerateResult& r);

}  // namespace fak::cli
