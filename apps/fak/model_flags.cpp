#include "apps/fak/model_flags.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>

#include "tokenizer/loader.h"

namespace fak::cli {

void ModelFlags::Add(CLI::App* cmd) {
  cmd->add_option("-m,--model", model, "GGUF file or HuggingFace checkpoint folder")->required();
  cmd->add_option("--tokenizer", tokenizer,
                  "Tokenizer (.gguf, tokenizer.json or folder); default: the model's");
  cmd->add_option("--quant", quant, "Weights at load: keep, f32, bf16, f16, q8_0, q4_k");
  cmd->add_option("-t,--threads", threads, "Threads (default: FAK_THREADS or all CPUs)");
  cmd->add_option("-c,--ctx,--ctx-size", ctx,
                  "Context length; 0: the model's trained context, at most 4096 (a warning when beyond it)");
  cmd->add_flag("--mmap", mmap, "Use GGUF tensors in place instead of copying them into huge pages");
  cmd->add_option("--kv-type", kv_type, "KV cache element type: f16 (default) or f32");
  cmd->add_option("--backend", backend, "Backend: cpu, cuda, or auto (cuda when a GPU is usable, else cpu)");
  cmd->add_flag("--check-finite", check_finite,
                "Check every layer's output for NaN and infinity and name the first one that has them (slow; "
                "non-finite logits are refused either way)");
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
  cmd->add_option("--seed", seed, "Sampling seed, 0 to 2^64-1; -1: a random seed, printed on stderr");
  cmd->add_option(
      "-l,--logit-bias", logit_bias,
      "TOKEN_ID+BIAS or TOKEN_ID-BIAS added to the token's logit; TOKEN_ID-inf bans it (repeatable)");
}

Status SamplingFlags::Resolve() {
  if (seed == "-1") {
    std::random_device rd;
    p.seed = (static_cast<uint64_t>(rd()) << 32) | rd();
    if (p.temperature > 0) std::fprintf(stderr, "fak: seed %llu\n", static_cast<unsigned long long>(p.seed));
  } else {
    const bool digits = !seed.empty() && seed.size() <= 20 &&
                        std::all_of(seed.begin(), seed.end(), [](char c) { return c >= '0' && c <= '9'; });
    errno = 0;
    const unsigned long long v = digits ? std::strtoull(seed.c_str(), nullptr, 10) : 0;
    if (!digits || errno == ERANGE) {
      return InvalidArgument("--seed '{}': want -1 (random) or a whole number from 0 to 18446744073709551615",
                             seed);
    }
    p.seed = v;
  }
  p.logit_bias.clear();
  for (const std::string& item : logit_bias) {
    const size_t sign = item.find_first_of("+-");
    const std::string id_text = item.substr(0, sign);
    const bool id_ok =
        sign != std::string::npos && !id_text.empty() && id_text.size() <= 9 &&
        std::all_of(id_text.begin(), id_text.end(), [](char c) { return c >= '0' && c <= '9'; });
    float bias = 0;
    bool bias_ok = false;
    if (id_ok) {
      const std::string value = item.substr(sign);
      if (value == "-inf") {
        bias = -std::numeric_limits<float>::infinity();
        bias_ok = true;
      } else {
        char* end = nullptr;
        errno = 0;
        bias = std::strtof(value.c_str(), &end);
        bias_ok =
            end == value.c_str() + value.size() && value.size() > 1 && errno == 0 && std::isfinite(bias);
      }
    }
    if (!id_ok || !bias_ok) {
      return InvalidArgument("--logit-bias '{}': want TOKEN_ID+BIAS, TOKEN_ID-BIAS or TOKEN_ID-inf", item);
    }
    p.logit_bias.emplace_back(std::stoi(id_text), bias);
  }
  return Status::Ok();
}

Status SamplingFlags::CheckVocabulary(int64_t vocab_size) const {
  for (const auto& [id, bias] : p.logit_bias) {
    if (id >= vocab_size) {
      return InvalidArgument("--logit-bias: token {} is outside the vocabulary of {}", id, vocab_size);
    }
  }
  return Status::Ok();
}

int64_t ContextFor(const ModelFlags& flags, const Model& model) {
  const int64_t trained = model.config.max_context;
  if (flags.ctx <= 0) return trained > 0 ? std::min(trained, kDefaultContext) : kDefaultContext;
  if (trained > 0 && flags.ctx > trained) {
    std::fprintf(stderr, "fak: warning: -c %lld exceeds the model's trained context of %lld tokens\n",
                 static_cast<long long>(flags.ctx), static_cast<long long>(trained));
  }
  return flags.ctx;
}

std::string ProcessEscapes(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char c = text[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\'':
      case '"':
      case '\\':
      case '?': out += c; break;
      case 'x':
        if (i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
          out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
          i += 2;
          break;
        }
        [[fallthrough]];
      default: out += '\\'; out += c;
    }
  }
  return out;
}

Result<RuntimeOptions> RuntimeOptionsFor(const ModelFlags& f, const Model& model, int64_t min_context) {
  if (f.kv_type != "f16" && f.kv_type != "f32")
    return InvalidArgument("unknown --kv-type '{}' (want f16 or f32)", f.kv_type);
  RuntimeOptions o;
  o.max_context = std::max(ContextFor(f, model), min_context);
  o.kv_f32 = f.kv_type == "f32";
  o.check_finite = f.check_finite;
  return o;
}

Status CreateRuntime(const ModelFlags& flags, LoadedModel& loaded, int64_t min_context,
                     int64_t max_sequences) {
  FAK_ASSIGN_OR_RETURN(RuntimeOptions o, RuntimeOptionsFor(flags, *loaded.model, min_context));
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

void PrintTimings(const GenerateResult& r) {
  const double pp =
      r.prefill_seconds > 0 ? (r.prompt_ids.size() - r.cached_prompt_tokens) / r.prefill_seconds : 0;
  const double tg = r.decode_seconds > 0 ? r.output_ids.size() / r.decode_seconds : 0;
  std::fprintf(
      stderr,
      "\nfak: prompt %zu tokens (%lld cached) in %.1f ms (%.1f tok/s); generated %zu tokens in %.1f ms "
      "(%.1f tok/s); stop: %s\n",
      r.prompt_ids.size(), static_cast<long long>(r.cached_prompt_tokens), r.prefill_seconds * 1e3, pp,
      r.output_ids.size(), r.decode_seconds * 1e3, tg, r.stop_reason.c_str());
}

}  // namespace fak::cli
