// Flags shared by the commands that load a model (run, chat, bench): model path, weight format,
// threads, context, tokenizer override; and what they load.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "backends/cpu/thread_pool.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace fak::cli {

struct ModelFlags {
  std::string model;
  std::string tokenizer;  // defaults to the model's own
  std::string quant = "keep";
  int threads = 0;        // 0: FAK_THREADS or every CPU
  int64_t ctx = 4096;
  bool mmap = false;
  std::string kv_type = "f16";  // KV cache element type: f16 or f32

  void Add(CLI::App* cmd);
};

struct LoadedModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<cpu::ThreadPool> pool;
};

// Session options from the flags (context, KV cache type); fails on an unknown --kv-type.
Result<SessionOptions> SessionOptionsFor(const ModelFlags& flags, int64_t min_context = 0);

// Loads model and tokenizer and checks they agree (the tokenizer may not be larger than the vocabulary).
Result<LoadedModel> LoadForRun(const ModelFlags& flags, bool need_tokenizer = true);

// A session over a loaded model with the flags' context and KV cache type.
Result<std::unique_ptr<Session>> CreateSession(const ModelFlags& flags, const LoadedModel& loaded);

struct SamplingFlags {
  SamplingParams p;
  void Add(CLI::App* cmd);
};

}  // namespace fak::cli
