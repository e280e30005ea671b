// A loaded model: its config and every weight in the layout the backend prefers. Weights live in
// one huge-page arena (or, with LoadOptions::use_mmap, in place in a GGUF mapping).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/weight_arena.h"
#include "engine/weight_source.h"
#include "formats/model_config.h"
#include "ops/backend.h"  // WeightLayout
#include "ops/weight.h"
#include "quant/ggml_type.h"

namespace fak {

// Target format for the matrices at load. kKeep keeps the file's own types.
enum class WeightQuant { kKeep, kF32, kBF16, kF16, kQ8_0, kQ4_K };
Result<WeightQuant> WeightQuantFromName(const std::string& name);  // "keep", "f32", "bf16", "q8_0", "q4_k"
const char* WeightQuantName(WeightQuant q);

struct LoadOptions {
  WeightQuant quant = WeightQuant::kKeep;
  bool huge_pages = true;  // MADV_HUGEPAGE on the weight arena
  bool use_mmap = false;   // GGUF tensors already in a kernel format are used in place, not copied
  const WeightLayout* layout = nullptr;  // the backend's preferred matrix layout; null: the default (CPU)
};

struct Model {
  ModelConfig config;
  bool rope_neox = true;
  std::vector<float> rope_inv_freq;  // (rotary_dim / 2): theta^(-2i/d) with the config's scaling
  double rope_attn_factor = 1.0;     // YaRN scales cos/sin by this
  // Every weight by its GGUF name, as the architecture's tensor list names them. With tied
  // embeddings "output.weight" is the output projection made from token_embd.
  std::map<std::string, Weight> weights;
  GgmlType embd_as = GgmlType::kF32;  // embedding lookups round-trip through this type

  // The weight named `name`, or an absent one.
  const Weight& Get(const std::string& name) const;

  std::unique_ptr<WeightSource> source;  // keeps mappings alive for in-place weights
  WeightArena arena;
  uint64_t weight_bytes = 0;       // bytes of all weights as loaded
  uint64_t lookup_only_bytes = 0;  // of those, a table only read a row at a time (untied embeddings)
  uint64_t expert_bytes = 0;       // of those, the experts' stacks (a token reads n_expert_used of them)
  double load_seconds = 0;

  Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
};

Result<std::unique_ptr<Model>> LoadModel(const std::string& path, const LoadOptions& options = {});
// From an opened source (tests use this to load the same source twice).
Result<std::unique_ptr<Model>> LoadModelFrom(std::unique_ptr<WeightSource> source,
                                             const LoadOptions& options);

// Weight bytes one decode step of one sequence reads: all but lookup tables, and of the experts only
// the n_expert_used a token picks.
uint64_t DecodeStepBytes(const Model& model);

// Expert e of a stacked (n_expert * rows, cols) weight (TensorSpec::experts), in the same layout.
Weight ExpertMatrix(const Weight& stacked, int64_t n_expert, int64_t e, const WeightLayout& layout);

// The type of the matrices holding most of the model's bytes ("q8_0" for a Q8_0 file).
GgmlType MainWeightType(const Model& model);

// The RoPE inverse frequencies a config declares (linear, llama3 and YaRN scaling applied), or the
// ones a GGUF rope_freqs tensor divides by.
std::vector<float> RopeInvFreq(const ModelConfig& config, const float* freq_factors = nullptr);
// YaRN's attention (cos/sin) scale; 1 for other scalings.
double RopeAttnFactor(const ModelConfig& config);

}  // namespace fak
