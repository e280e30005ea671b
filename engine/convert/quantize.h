// `fak quantize IN OUT TYPE`: GGUF -> GGUF (all metadata copied, matrices requantized) and
// HuggingFace checkpoint folder -> GGUF (config.json, safetensors and tokenizer into GGUF keys).
// Rows are converted one at a time into the streaming writer; the output appears only when whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/convert/synth.h"  // ConvertReport

namespace fak::convert {

struct QuantizeOptions {
  std::string input;   // a GGUF file, or a folder with config.json, *.safetensors and a tokenizer
  std::string output;  // .gguf path
  std::string type;    // a FileTypeFromName name
  int threads = 0;     // 0: DefaultThreadCount()
  TensorProgress progress;
  // Replaces the input's tokenizer (a .gguf, tokenizer.json, tokenizer.model or a folder with one);
  // for a GGUF input its tokenizer.ggml.* keys are dropped and written from this one.
  std::string tokenizer;
};

Result<ConvertReport> QuantizeModel(const QuantizeOptions& options);

// llama.cpp's q/k permutation for GGUF "llama" files (interleaved-pair RoPE): within each head of
// head_dim rows, output row 2*i + j comes from HF row j*head_dim/2 + i (HF is rotate-half).
int64_t LlamaPermutedSourceRow(int64_t row, int64_t head_dim);

// Llama 3's rope_freqs factors (one per rotary pair) for a config with llama3 RoPE scaling, as
// llama.cpp's converter writes them; fak's loader divides the inverse frequencies by them.
std::vector<float> Llama3RopeFactors(const ModelConfig& c);

}  // namespace fak::convert
