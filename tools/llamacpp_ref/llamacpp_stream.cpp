// Records llama.cpp's streamed continuations for tests/fixtures/tokenizer/llamacpp_stream.json: a
// prompt's tokenization (special tokens added and parsed, as llama-cli does), the greedy ids that follow
// it (or ids given), and the bytes llama-cli writes for them (each id's piece; special tokens not
// rendered). Built against a llama.cpp checkout, not part of fak's build:
//
//   g++ -O1 -std=c++17 llamacpp_stream.cpp -I$LLAMA/include -I$LLAMA/ggml/include -L$LLAMA/build/bin \
//       -lllama -lggml -lggml-base -o llamacpp_stream
//   llamacpp_stream MODEL.gguf N_GEN PROMPT_HEX [PROMPT_HEX:ID,ID,...] ...   (one JSON line per prompt)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "llama.h"
static std::string Hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) {
    h += d[c >> 4];
    h += d[c & 15];
  }
  return h;
}
static std::string Unhex(const char* h) {
  std::string s;
  for (size_t i = 0; h[i] && h[i + 1]; i += 2) {
    auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    s += static_cast<char>(v(h[i]) * 16 + v(h[i + 1]));
  }
  return s;
}
int main(int argc, char** argv) {
  const char* model_path = argv[1];
  const int n_gen = atoi(argv[2]);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(model_path, mp);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  for (int a = 3; a < argc; ++a) {
    // "PROMPT_HEX" generates greedily; "PROMPT_HEX:ID,ID,..." takes those ids as the continuation.
    std::string arg = argv[a], forced;
    if (arg.find(':') != std::string::npos) {
      forced = arg.substr(arg.find(':') + 1);
      arg = arg.substr(0, arg.find(':'));
    }
    const std::string prompt = Unhex(arg.c_str());
    std::vector<llama_token> ids(prompt.size() + 16);
    // LLAMACPP_STREAM_NO_SPECIAL=1: special tokens in the prompt are text (not parsed).
    const bool parse_special = std::getenv("LLAMACPP_STREAM_NO_SPECIAL") == nullptr;
    int n = llama_tokenize(vocab, prompt.data(), prompt.size(), ids.data(), ids.size(), true, parse_special);
    ids.resize(n);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    llama_context* ctx = llama_init_from_model(model, cp);
    std::vector<llama_token> all = ids, gen;
    std::string text, pieces;
    std::vector<int> forced_ids;
    for (size_t p = 0; !forced.empty() && p < forced.size();) {
      size_t q = forced.find(',', p);
      if (q == std::string::npos) q = forced.size();
      forced_ids.push_back(std::stoi(forced.substr(p, q - p)));
      p = q + 1;
    }
    const int steps = forced_ids.empty() ? n_gen : static_cast<int>(forced_ids.size());
    llama_batch b = llama_batch_get_one(all.data(), all.size());
    if (steps > 0) llama_decode(ctx, b);  // with nothing to generate, the tokenization alone
    for (int i = 0; i < steps; ++i) {
      const float* lg = llama_get_logits_ith(ctx, -1);
      int nv = llama_vocab_n_tokens(vocab), best = 0;
      for (int v = 1; v < nv; ++v)
        if (lg[v] > lg[best]) best = v;
      if (!forced_ids.empty()) best = forced_ids[i];
      gen.push_back(best);
      if (llama_vocab_is_eog(vocab, best)) break;
      char buf[256];
      int m = llama_token_to_piece(vocab, best, buf, sizeof(buf), 0, false);
      std::string piece(buf, m > 0 ? m : 0);
      text += piece;
      pieces += std::string(pieces.empty() ? "" : ",") + "\"" + Hex(piece) + "\"";
      llama_token t = best;
      llama_batch one = llama_batch_get_one(&t, 1);
      llama_decode(ctx, one);
    }
    std::printf("{\"prompt_hex\": \"%s\", \"forced\": %s, \"prompt_ids\": [", arg.c_str(),
                forced.empty() ? "false" : "true");
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? ", " : "", ids[i]);
    std::printf("], \"greedy_ids\": [");
    for (size_t i = 0; i < gen.size(); ++i) std::printf("%s%d", i ? ", " : "", gen[i]);
    std::printf("], \"pieces_hex\": [%s], \"text_hex\": \"%s\"}\n", pieces.c_str(), Hex(text).c_str());
    llama_free(ctx);
  }
  llama_model_free(model);
  return 0;
}
