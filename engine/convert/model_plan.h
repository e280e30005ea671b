// What a llama-family GGUF holds: the synthetic geometries (data, one row each) and the canonical
// tensor list of a ModelConfig, in the order fak writes them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "formats/model_config.h"

namespace fak::convert {

struct SynthGeometry {
  std::string_view name;
  std::string_view arch;  // default architecture
  int64_t n_layer, d_model, d_ffn, n_head, n_kv_head, head_dim;
  bool tied_embeddings;
  double rope_theta;
  double norm_eps;
  int64_t context;
  // Hybrid (qwen3_5, qwen3_5_moe) only: Gated-DeltaNet key/value heads of 128 (0: not a hybrid); every
  // fourth layer is full attention, rotating a quarter of each head.
  int64_t linear_n_key_head = 0, linear_n_value_head = 0;
  // Experts (qwen3_5_moe) in every layer: how many, used per token, their width and the shared expert's.
  int64_t n_expert = 0, n_expert_used = 0, d_expert_ffn = 0, d_shared_expert_ffn = 0;
};

// Vocabulary of every synthetic model: Qwen2.5's padded 151,936 (151,643 BPE tokens, the added
// tokens, then "[PADn]" fillers).
constexpr int64_t kSynthVocab = 151936;

// nullptr for an unknown name.
const SynthGeometry* FindGeometry(std::string_view name);
std::string GeometryNames();  // "tiny, tiny-llama, qwen2.5-0.5b, ..."

// The architectures fak synthesizes: llama (no biases), qwen2 (q/k/v biases), qwen3 (q/k norms), qwen3_5
// and qwen3_5_moe (the Gated-DeltaNet hybrids; their geometries only).
bool IsWritableArch(std::string_view arch);

// A geometry as a ModelConfig for `arch` (empty: the geometry's own).
Result<ModelConfig> ConfigForGeometry(const SynthGeometry& g, std::string_view arch, int64_t vocab);

enum class TensorKind { kMatrix, kNorm, kBias, kTable };

struct PlannedTensor {
  std::string name;             // "blk.0.attn_q.weight"
  std::vector<uint64_t> shape;  // ggml order: shape[0] is the row length
  TensorKind kind;
  bool output = false;     // the output projection (token_embd when tied)
  bool more_bits = false;  // TensorSpec::more_bits
  bool rope_rows = false;  // TensorSpec::rope_rows
};

// The architecture's own tensor list (engine/arch), less the output matrix when tied; empty for an
// architecture fak does not know.
std::vector<PlannedTensor> PlanTensors(const ModelConfig& c);

}  // namespace fak::convert
