// Weight source: a GGUF file or a HuggingFace checkpoint behind one interface that yields named
// tensors. Names and shapes are canonical (GGUF's): "blk.3.attn_q.weight", shape[0] contiguous.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/gguf.h"
#include "formats/model_config.h"
#include "formats/safetensors.h"

namespace fak {

// How a stored tensor becomes the canonical one beyond its name (HF checkpoints of some
// architectures): rows or columns reordered or picked (one stored matrix may feed two canonical ones),
// every value mapped, dimensions of 1 dropped, or several stored matrices stacked (experts).
struct SourceTransform {
  enum Value { kNone, kAddOne, kNegExp } value = kNone;  // x + 1 (zero-centred norms); -exp(x) (A_log)
  std::vector<int64_t> row_from;  // canonical row r is stored row row_from[r]; empty: the same
  std::vector<int64_t> col_from;  // canonical column c is stored column col_from[c]; empty: the same
  // Stacked: stored row s is row s % part_rows of the matrix at parts[s / part_rows] (each of
  // part_bytes bytes); empty: one matrix at SourceTensor::data.
  std::vector<const uint8_t*> parts;
  int64_t part_rows = 0;
  uint64_t part_bytes = 0;
};

struct SourceTensor {
  std::string name;                // canonical name
  std::string source_name;         // as stored ("model.layers.3.self_attn.q_proj.weight")
  std::vector<uint64_t> shape;     // ggml order: shape[0] is the contiguous dimension
  GgmlType type = GgmlType::kF32;  // F32, F16, BF16 or a GGUF block type
  const uint8_t* data = nullptr;   // in the source's mapping
  uint64_t n_bytes = 0;
  std::shared_ptr<const SourceTransform> transform;  // null: the stored values are the canonical ones
};

// Row r (cols values) of t's canonical form as f32, its transform applied. scratch holds a stored
// row while columns are reordered.
Status ReadCanonicalRow(const SourceTensor& t, int64_t r, int64_t cols, float* out,
                        std::vector<float>& scratch);
// Calls fn(data, n_bytes) for each stored range t reads (its parts when stacked).
template <typename Fn>
void ForEachStoredRange(const SourceTensor& t, Fn fn) {
  if (t.transform != nullptr && !t.transform->parts.empty()) {
    for (const uint8_t* p : t.transform->parts) fn(p, t.transform->part_bytes);
  } else {
    fn(t.data, t.n_bytes);
  }
}

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual const ModelConfig& config() const = 0;
  virtual const std::vector<SourceTensor>& tensors() const = 0;
  virtual const SourceTensor* Find(const std::string& name) const = 0;
  // "gguf" or "huggingface".
  virtual std::string kind() const = 0;
  // Path a tokenizer can be loaded from (the GGUF file, or the checkpoint folder).
  virtual std::string tokenizer_path() const = 0;
  // True when q/k rows are laid out for rotate-half ("neox") RoPE: HF checkpoints and GGUF qwen2/3.
  // GGUF llama files permute q/k rows for the interleaved-pair form.
  virtual bool rope_neox() const = 0;
  // Lets the source drop pages it no longer needs from memory (bytes of a tensor already converted),
  // so a lean load's resident memory stays near the size of the converted weights.
  virtual void Release(const uint8_t* data, uint64_t n_bytes) const {}
};

// Opens FILE.gguf, a .safetensors file beside a config.json, or a checkpoint folder.
// A GGUF file's ModelConfig: its metadata (formats/model_config.h), then what its architecture reads
// from the tensors it holds.
Result<ModelConfig> ConfigFromGguf(const GgufFile& file);

Result<std::unique_ptr<WeightSource>> OpenWeightSource(const std::string& path);

// HF tensor name -> canonical name for an architecture (ModelConfig::arch); "" when it is not a
// tensor fak uses.
std::string CanonicalTensorName(const std::string& hf_name, const std::string& arch);

}  // namespace fak
