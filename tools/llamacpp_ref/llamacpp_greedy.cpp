// Greedy decoding and teacher-forced scoring with llama.cpp's library, for parity checks against fak.
// Reads one request per stdin line, "PROMPT_IDS" or "PROMPT_IDS | FORCED_IDS" (space-separated token
// ids), and writes one JSON line each:
//   {"tokens":[...], "margins":[...]}              greedy: N argmax tokens, top-1 minus top-2 logit
//   {"argmax":[...], "margins":[...], "forced_rank_gap":[...]}
//                                                  forced: at each forced step, llama.cpp's argmax and
//                                                  margin, and max logit minus the forced token's logit
// Usage: llamacpp_greedy MODEL.gguf N_GEN FLASH_ATTN(auto|on|off) KV_TYPE(f16|f32) [THREADS]
// Built by scripts/parity-llamacpp.sh against a llama.cpp build; not part of fak.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

std::vector<llama_token> ParseIds(const std::string& text) {
  std::vector<llama_token> ids;
  std::istringstream in(text);
  long v;
  while (in >> v) ids.push_back(static_cast<llama_token>(v));
  return ids;
}

struct Top2 {
  int best;
  float margin;
  float max;
};

Top2 Best(const float* logits, int n) {
  int best = 0, second = -1;
  for (int i = 1; i < n; ++i) {
    if (logits[i] > logits[best]) {
      second = best;
      best = i;
    } else if (second < 0 || logits[i] > logits[second]) {
      second = i;
    }
  }
  return {best, logits[best] - logits[second], logits[best]};
}

void PrintList(const char* key, const std::vector<double>& v, bool ints) {
  std::printf("\"%s\":[", key);
  for (size_t i = 0; i < v.size(); ++i) {
    if (ints)
      std::printf("%s%lld", i ? "," : "", static_cast<long long>(v[i]));
    else
      std::printf("%s%.6g", i ? "," : "", v[i]);
  }
  std::printf("]");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s MODEL.gguf N_GEN auto|on|off f16|f32 [THREADS]\n", argv[0]);
    return 2;
  }
  const int n_gen = std::atoi(argv[2]);
  const std::string fa = argv[3], kv = argv[4];
  const int threads = argc > 5 ? std::atoi(argv[5]) : 2;
  if (n_gen < 1 || (fa != "auto" && fa != "on" && fa != "off") || (kv != "f16" && kv != "f32")) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }
  llama_backend_init();
  llama_log_set(
      [](ggml_log_level level, const char* text, void*) {
        if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
      },
      nullptr);
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) {
    std::fprintf(stderr, "%s: llama.cpp could not load the model\n", argv[1]);
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::string line;
  while (std::getline(std::cin, line)) {
    const size_t bar = line.find('|');
    const std::vector<llama_token> prompt = ParseIds(line.substr(0, bar));
    const std::vector<llama_token> forced =
        bar == std::string::npos ? std::vector<llama_token>{} : ParseIds(line.substr(bar + 1));
    if (prompt.empty()) continue;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 1024;
    cp.n_batch = cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.flash_attn_type = fa == "auto" ? LLAMA_FLASH_ATTN_TYPE_AUTO
                         : fa == "on" ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                                      : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    if (kv == "f32") cp.type_k = cp.type_v = GGML_TYPE_F32;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (ctx == nullptr) {
      std::fprintf(stderr, "could not create a llama.cpp context\n");
      return 1;
    }
    std::vector<llama_token> tokens(prompt);
    if (llama_decode(ctx, llama_batch_get_one(tokens.data(), static_cast<int32_t>(tokens.size()))) != 0) {
      std::fprintf(stderr, "llama_decode failed on the prompt\n");
      return 1;
    }
    std::vector<double> picked, margins, gaps;
    const int steps = forced.empty() ? n_gen : static_cast<int>(forced.size());
    for (int s = 0; s < steps; ++s) {
      const float* logits = llama_get_logits_ith(ctx, -1);
      const Top2 t = Best(logits, n_vocab);
      picked.push_back(t.best);
      margins.push_back(t.margin);
      llama_token next = t.best;
      if (!forced.empty()) {
        next = forced[s];
        gaps.push_back(t.max - logits[next]);
      }
      if (s + 1 == steps) break;
      if (llama_decode(ctx, llama_batch_get_one(&next, 1)) != 0) {
        std::fprintf(stderr, "llama_decode failed at step %d\n", s);
        return 1;
      }
    }
    std::printf("{");
    PrintList(forced.empty() ? "tokens" : "argmax", picked, true);
    std::printf(",");
    PrintList("margins", margins, false);
    if (!forced.empty()) {
      std::printf(",");
      PrintList("forced_rank_gap", gaps, false);
    }
    std::printf("}\n");
    std::fflush(stdout);
    llama_free(ctx);
  }
  llama_model_free(model);
  return 0;
}
