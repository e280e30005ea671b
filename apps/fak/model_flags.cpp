#include "apps/fak/model_flags.h"

#include <algorithm>

#include "tokenizer/loader.h"

namespace fak::cli {

void ModelFlags::Add(CLI::App* cmd) {
  cmd->add_option("-m,--model", model, "GGUF file or HuggingFace checkpoint folder")->required();
  cmd->add_option("--tokenizer", tokenizer,
                  "Tokenizer (.gguf, tokenizer.json or folder); default: the model's");
  cmd->add_option("--quant", quant, "Weights at load: keep, f32, bf16, f16, q8_0, q4_k");
  cmd->add_option("-t,--threads", threads, "Threads (default: FAK_THREADS or all CPUs)");
  cmd->add_option("-c,--ctx", ctx, "Context length");
  cmd->add_flag("--mmap", mmap, "Use GGUF tensors in place instead of copying them into huge pages");
  cmd->add_option("--kv-type", kv_type, "KV cache element type: f16 (default) or f32");
  cmd->add_option("--backend", backend, "Backend: cpu, cuda, or auto (cuda when a GPU is usable, else cpu)");
}

void SamplingFlags::Add(CLI::App* cmd) {
  cmd->add_option("--temp", p.temperature, "Temperature (0: greedy)");
  cmd->add_option("--top-k", p.top_k, "Top-k (0: off)");
  cmd->add_option("--top-p", p.top_p, "Top-p (1: off)");
  cmd->add_option("--min-p", p.min_p, "Min-p (0: off)");
  cmd->add_option("--repeat-penalty", p.repetition_penalty, "Repetition penalty (1: off)");
  cmd->add_option("--presence-penalty", p.presence_penalty, "Presence penalty");
  cmd->add_option("--frequency-penalty", p.frequency_penalty, "Frequency penalty");
  cmd->add_option("--repeat-last-n", p.penalty_window, "Tokens the penalties look back over");
  cmd->add_option("--seed", p.seed, "Sampling seed");
}

Result<RuntimeOptions> RuntimeOptionsFor(const ModelFlags& f, int64_t min_context) {
  if (f.kv_type != "f16" && f.kv_type != "f32")
    return InvalidArgument("unknown --kv-type '{}' (want f16 or f32)", f.kv_type);
  RuntimeOptions o;
  o.max_context = std::max(f.ctx, min_context);
  o.kv_f32 = f.kv_type == "f32";
  return o;
}

Status CreateRuntime(const ModelFlags& flags, LoadedModel& loaded, int64_t min_context,
                     int64_t max_sequences) {
  FAK_ASSIGN_OR_RETURN(RuntimeOptions o, RuntimeOptionsFor(flags, min_context));
  o.max_sequences = max_sequences;
  loaded.runtime.reset();
  FAK_ASSIGN_OR_RETURN(loaded.runtime, Runtime::Create(*loaded.model, o, loaded.backend.get()));
  return Status::Ok();
}

Result<std::unique_ptr<Session>> CreateSession(const ModelFlags& flags, LoadedModel& loaded,
                                               int64_t min_context) {
  FAK_RETURN_IF_ERROR(CreateRuntime(flags, loaded, min_context));
  return Session::Create(*loaded.runtime);
}

Result<LoadedModel> LoadForRun(const ModelFlags& f, bool need_tokenizer) {
  LoadedModel out;
  FAK_ASSIGN_OR_RETURN(WeightQuant q, WeightQuantFromName(f.quant));
  LoadOptions lo;
  lo.quant = q;
  lo.use_mmap = f.mmap;
  FAK_ASSIGN_OR_RETURN(out.backend, CreateBackend({.name = f.backend, .threads = f.threads}));
  lo.layout = &out.backend->layout();
  FAK_ASSIGN_OR_RETURN(out.model, LoadModel(f.model, lo));
  if (need_tokenizer) {
    const std::string tpath = f.tokenizer.empty() ? out.model->source->tokenizer_path() : f.tokenizer;
    auto tok = LoadTokenizer(tpath);
    if (!tok.ok()) return tok.status().WithContext("loading the tokenizer (use --tokenizer to give one)");
    out.tokenizer = std::make_unique<Tokenizer>(std::move(tok).value());
    if (out.tokenizer->vocab_size() > out.model->config.vocab_size) {
      return InvalidArgument("tokenizer {} has {} tokens but the model's vocabulary (vocab_size) is {}",
                             tpath, out.tokenizer->vocab_size(), out.model->config.vocab_size);
    }
  }
  return out;
}

}  // namespace fak::cli
