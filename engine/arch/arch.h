// The architecture seam: each family is one file (engine/arch/NAME.cpp) that owns its names, its
// tensor list (which the loader, the HF name map and the GGUF writer all read), its per-layer cache
// kinds and its forward pass, written only as Backend calls. It registers itself in one table
// (arch.cpp). Size variants are data (ModelConfig), not code.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/model.h"
#include "engine/weight_source.h"  // SourceTensor
#include "formats/model_config.h"
#include "ops/backend.h"

namespace fak {

enum class TensorRole {
  kMatrix,     // multiplied by activations
  kEmbedding,  // token_embd: looked up by row; doubles as the output matrix when tied
  kOutput,     // the output projection; absent when tied to the embedding
  kNorm,       // f32 vector
  kBias,       // f32 vector
  kTable,      // small f32 matrix read whole by an op (a convolution kernel); never quantized
};

// One tensor the architecture reads, by its GGUF name. Matrices are (rows, cols) with GGUF shape
// {cols, rows}; vectors have rows == 1.
struct TensorSpec {
  std::string name;  // "blk.3.attn_q.weight"
  int64_t rows = 1;
  int64_t cols = 0;
  TensorRole role = TensorRole::kMatrix;
  const char* what = "";   // the shape's meaning, for errors: "n_head*head_dim x d_model"
  bool optional = false;   // may be absent from the file (kOutput: then tied)
  bool more_bits = false;  // llama.cpp's _M mixes give it Q6_K in the layers UseMoreBits picks
  bool rope_rows = false;  // q/k rows that llama-arch GGUF files permute for interleaved RoPE
  // A stack of this many (rows, cols) matrices, one per expert, GGUF shape {cols, rows, experts}; the
  // loaded Weight is (experts * rows, cols) and ExpertMatrix gives each one. 0: a plain tensor.
  int64_t experts = 0;
};

// What one layer keeps per sequence: keys and values in KV pages, or a fixed-size recurrent state
// (state_bytes of each sequence's state slot, laid out as the architecture chooses).
struct LayerCache {
  enum Kind { kKv, kState } kind = kKv;
  size_t state_bytes = 0;
};

// Sees the residual stream after each stage of a forward pass: "embedding" (layer -1), then
// "attention" and "ffn" of every layer, then "logits" (layer -1). A debugging aid (finding the first
// layer whose output is not finite); it may Download and synchronize, so it costs time.
class ForwardProbe {
 public:
  virtual ~ForwardProbe() = default;
  virtual void After(const char* stage, int64_t layer, Tensor x) = 0;
};

// A loaded model bound to one backend: its weights as backend handles, its activations, and the
// forward pass.
class ArchInstance {
 public:
  virtual ~ArchInstance() = default;
  void set_probe(ForwardProbe* probe) { probe_ = probe; }
  // Allocates activations for batches of up to max_rows rows with up to max_out logits rows.
  virtual Status Reserve(int64_t max_rows, int64_t max_out) = 0;
  // Queues the forward pass of `batch` (set on the backend already): writes every row's keys and
  // values into the KV store (its layers are the architecture's kKv layers, in order), advances the
  // recurrent state of each sequence in the state store (-1 when the architecture has none) and
  // writes the logits of batch.out_rows into logits (n_out, vocab).
  virtual void Forward(const BatchPlan& batch, int32_t kv, int32_t states, Tensor logits) = 0;

 protected:
  void Probe(const char* stage, int64_t layer, Tensor x) {
    if (probe_ != nullptr) probe_->After(stage, layer, x);
  }

 private:
  ForwardProbe* probe_ = nullptr;
};

struct Architecture {
  const char* name;
  std::vector<std::string> handles;  // ModelConfig::arch values (HF model_type, GGUF general.architecture)
  // HF tensor names to GGUF ones: whole names, and per-layer suffixes under "model.layers.N.".
  std::vector<std::pair<const char*, const char*>> hf_top, hf_layer;
  // Per-expert HF suffixes under "model.layers.N.mlp.experts.E." whose matrices are stacked into one
  // GGUF tensor of (n_expert, rows, cols), named by the second: {"gate_proj.weight", "ffn_gate_exps.weight"}.
  std::vector<std::pair<const char*, const char*>> hf_experts;
  // Every tensor a model of this config has, in the order fak writes them.
  std::vector<TensorSpec> (*tensors)(const ModelConfig& c);
  std::vector<LayerCache> (*caches)(const ModelConfig& c);
  // Config facts a GGUF file states only through its tensors (has_tensor: whether the file holds one).
  void (*configure_from_tensors)(ModelConfig& c, const std::function<bool(const std::string&)>& has_tensor);
  // What an HF checkpoint's tensor needs beyond its name to become the GGUF one (sets
  // t.transform, may reshape t.shape); a stored matrix that holds two GGUF ones gives the second in
  // `more`. Null when nothing does.
  Status (*hf_transform)(const ModelConfig& c, SourceTensor& t, std::vector<SourceTensor>& more);
  // Binds a loaded model's weights to a backend (checked once, here).
  Result<std::unique_ptr<ArchInstance>> (*instantiate)(const Model& model, Backend& backend);
};

// Shared by the architecture files.
// Frees t when allocated and allocates it anew as (rows, cols) on the backend.
Status ReallocActivation(Backend& be, Tensor& t, int64_t rows, int64_t cols);
// A table of (GGUF suffix, HF suffix) pairs turned into the HF -> GGUF map Architecture::hf_layer holds.
template <size_t N>
std::vector<std::pair<const char*, const char*>> HfToGgufNames(
    const std::pair<const char*, const char*> (&table)[N]) {
  std::vector<std::pair<const char*, const char*>> out;
  for (const auto& [gguf, hf] : table) out.emplace_back(hf, gguf);
  return out;
}

// nullptr when no registered architecture handles `arch`.
const Architecture* FindArchitecture(const std::string& arch);
// Every registered architecture.
std::vector<const Architecture*> Architectures();

// Registered architectures (one line each in arch.cpp).
const Architecture& LlamaFamily();
const Architecture& Qwen35Hybrid();
const Architecture& Qwen3NextHybrid();

}  // namespace fak
