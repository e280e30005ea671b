// `fak synth`: a random-weight model at a real geometry with a real tokenizer, for benchmarks.
// Weights are generated and quantized row by row straight into the GGUF writer, so no f32 copy of
// the model is ever held; the bytes depend only on the options (not on the thread count).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "engine/convert/gguf_model_writer.h"
#include "engine/convert/model_plan.h"

namespace fak::convert {

struct SynthOptions {
  std::string geometry;   // a FindGeometry name
  std::string arch;       // llama, qwen2 or qwen3; empty: the geometry's own
  std::string type;       // a FileTypeFromName name
  std::string output;     // .gguf path; written as <output>.tmp and renamed
  std::string tokenizer;  // tokenizer.json, its folder, or a GGUF (byte-level BPE with <= 151,936 tokens)
  uint64_t seed = 0;
  int threads = 0;  // 0: DefaultThreadCount()
  TensorProgress progress;
};

struct ConvertReport {
  size_t tensors = 0;
  uint64_t parameters = 0;
  uint64_t file_bytes = 0;
  double seconds = 0;
};

// Checks every option (and that the output folder exists) before anything is written.
Result<ConvertReport> Synthesize(const SynthOptions& options);

// Value distribution of a synthetic tensor: matrices N(0, 0.02), norms 1 + N(0, 0.02), biases
// N(0, 0.01). Keeps activations in range through 32 layers (each block adds O(1) to the residual).
struct ValueScale {
  float mean, stddev;
};
ValueScale SynthValueScale(TensorKind kind);

}  // namespace fak::convert
