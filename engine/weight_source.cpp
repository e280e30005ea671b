#include "engine/weight_source.h"

#include "engine/arch/arch.h"  // Architectures: the HF name maps

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "quant/codec.h"  // DequantizeRow

namespace fak {
namespace {

namespace fs = std::filesystem;

void DropPages(const uint8_t* data, uint64_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto addr = reinterpret_cast<uintptr_t>(data);
  const uintptr_t b = (addr + page - 1) & ~(page - 1);
  const uintptr_t e = (addr + n) & ~(page - 1);
  // The page-aligned range as offsets from `data`, which keeps the pointer's provenance.
  if (e > b) madvise(const_cast<uint8_t*>(data) + (b - addr), e - b, MADV_DONTNEED);
}

class GgufSource final : public WeightSource {
 public:
  static Result<std::unique_ptr<WeightSource>> Open(const std::string& path) {
    auto s = std::make_unique<GgufSource>();
    FAK_ASSIGN_OR_RETURN(s->file_, GgufFile::Open(path));
    FAK_ASSIGN_OR_RETURN(s->config_, ConfigFromGguf(s->file_));
    for (const auto& t : s->file_.tensors()) {
      s->index_[t.name] = s->tensors_.size();
      s->tensors_.push_back(SourceTensor{t.name, t.name, t.shape, t.type, t.data, t.n_bytes, nullptr});
    }
    s->path_ = path;
    return std::unique_ptr<WeightSource>(std::move(s));
  }
  const ModelConfig& config() const override { return config_; }
  const std::vector<SourceTensor>& tensors() const override { return tensors_; }
  const SourceTensor* Find(const std::string& name) const override {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
  }
  std::string kind() const override { return "gguf"; }
  std::string tokenizer_path() const override { return path_; }
  bool rope_neox() const override { return config_.arch != "llama"; }
  void Release(const uint8_t* data, uint64_t n) const override { DropPages(data, n); }

 private:
  GgufFile file_;
  ModelConfig config_;
  std::string path_;
  std::vector<SourceTensor> tensors_;
  std::map<std::string, size_t> index_;
};

Result<GgmlType> GgmlTypeForDtype(const SafetensorsTensor& t) {
  switch (t.dtype) {
    case SafetensorsDtype::kF32: return GgmlType::kF32;
    case SafetensorsDtype::kF16: return GgmlType::kF16;
    case SafetensorsDtype::kBF16: return GgmlType::kBF16;
    default:
      return Unsupported("tensor '{}': dtype {} (fak loads F32, F16 and BF16 checkpoints)", t.name,
                         SafetensorsDtypeName(t.dtype));
  }
}

class HfSource final : public WeightSource {
 public:
  static Result<std::unique_ptr<WeightSource>> Open(const std::string& path) {
    auto s = std::make_unique<HfSource>();
    std::string dir = fs::is_directory(path) ? path : fs::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
    s->dir_ = dir;
    FAK_ASSIGN_OR_RETURN(s->config_, ModelConfigFromHfDir(dir));
    FAK_ASSIGN_OR_RETURN(s->ckpt_, SafetensorsCheckpoint::Open(path, MapOptions{}));
    const Architecture* arch = FindArchitecture(s->config_.arch);
    std::map<std::string, std::map<int64_t, const SafetensorsTensor*>> experts;  // stacked name -> parts
    for (const SafetensorsTensor* t : s->ckpt_.tensors()) {
      if (auto [name, e] = ExpertTensorName(t->name, arch); !name.empty()) {
        if (!experts[name].emplace(e, t).second) return Corrupt("{}: expert {} of '{}' twice", path, e, name);
        continue;
      }
      std::string name = CanonicalTensorName(t->name, s->config_.arch);
      if (name.empty()) continue;  // rotary caches and other tensors fak does not use
      FAK_ASSIGN_OR_RETURN(GgmlType type, GgmlTypeForDtype(*t));
      SourceTensor st{name,   t->name, std::vector<uint64_t>(t->shape.rbegin(), t->shape.rend()),
                      type,   t->data, t->n_bytes,
                      nullptr};
      if (st.shape.empty()) st.shape.push_back(1);
      std::vector<SourceTensor> more;
      if (arch != nullptr && arch->hf_transform != nullptr) {
        FAK_RETURN_IF_ERROR(arch->hf_transform(s->config_, st, more));
      }
      more.insert(more.begin(), std::move(st));
      for (SourceTensor& m : more) FAK_RETURN_IF_ERROR(s->Add(path, std::move(m)));
    }
    for (auto& [name, parts] : experts) FAK_RETURN_IF_ERROR(s->AddStacked(path, name, parts));
    return std::unique_ptr<WeightSource>(std::move(s));
  }
  const ModelConfig& config() const override { return config_; }
  const std::vector<SourceTensor>& tensors() const override { return tensors_; }
  const SourceTensor* Find(const std::string& name) const override {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
  }
  std::string kind() const override { return "huggingface"; }
  std::string tokenizer_path() const override { return dir_; }
  bool rope_neox() const override { return true; }
  void Release(const uint8_t* data, uint64_t n) const override { DropPages(data, n); }

 private:
  // "model.layers.3.mlp.experts.7.gate_proj.weight" -> {"blk.3.ffn_gate_exps.weight", 7} when the
  // architecture stacks that tensor; {"", -1} otherwise.
  static std::pair<std::string, int64_t> ExpertTensorName(const std::string& hf_name, const Architecture* a) {
    static const std::string kPrefix = "model.layers.", kExperts = ".mlp.experts.";
    std::string hf = hf_name;
    if (hf.rfind("model.language_model.", 0) == 0) hf = "model." + hf.substr(21);
    if (a == nullptr || a->hf_experts.empty() || hf.rfind(kPrefix, 0) != 0) return {"", -1};
    const size_t dot = hf.find('.', kPrefix.size());
    if (dot == std::string::npos || hf.compare(dot, kExperts.size(), kExperts) != 0) return {"", -1};
    const std::string layer = hf.substr(kPrefix.size(), dot - kPrefix.size());
    const size_t e0 = dot + kExperts.size(), e1 = hf.find('.', e0);
    if (e1 == std::string::npos) return {"", -1};
    const std::string expert = hf.substr(e0, e1 - e0);
    auto digits = [](const std::string& x) {
      return !x.empty() && x.size() < 9 && x.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(layer) || !digits(expert)) return {"", -1};
    const std::string suffix = hf.substr(e1 + 1);
    for (const auto& [from, to] : a->hf_experts) {
      if (suffix == from) return {"blk." + layer + "." + to, std::stoll(expert)};
    }
    return {"", -1};
  }

  Status Add(const std::string& path, SourceTensor st) {
    if (index_.count(st.name) != 0) return Corrupt("{}: two tensors map to '{}'", path, st.name);
    index_[st.name] = tensors_.size();
    tensors_.push_back(std::move(st));
    return Status::Ok();
  }

  // The experts' matrices as one (n_expert, rows, cols) tensor, read in place from each part.
  Status AddStacked(const std::string& path, const std::string& name,
                    const std::map<int64_t, const SafetensorsTensor*>& parts) {
    const SafetensorsTensor* first = parts.begin()->second;
    const auto n = static_cast<int64_t>(parts.size());
    if (parts.begin()->first != 0 || parts.rbegin()->first != n - 1) {
      return Corrupt("{}: the experts of '{}' are not numbered 0 to {} (found {} to {})", path, name, n - 1,
                     parts.begin()->first, parts.rbegin()->first);
    }
    if (config_.n_expert > 0 && n != config_.n_expert) {
      return Corrupt("{}: '{}' has {} experts, the config {}", path, name, n, config_.n_expert);
    }
    if (first->shape.size() != 2) {
      return Corrupt("{}: expert tensor '{}' has {} dimensions, want 2", path, first->name,
                     first->shape.size());
    }
    auto tf = std::make_shared<SourceTransform>();
    for (const auto& [e, t] : parts) {
      if (t->shape != first->shape || t->dtype != first->dtype) {
        return Corrupt("{}: expert tensor '{}' differs in shape or type from '{}'", path, t->name,
                       first->name);
      }
      tf->parts.push_back(t->data);
    }
    FAK_ASSIGN_OR_RETURN(GgmlType type, GgmlTypeForDtype(*first));
    tf->part_rows = static_cast<int64_t>(first->shape[0]);
    tf->part_bytes = first->n_bytes;
    SourceTensor st{name,
                    first->name,
                    {static_cast<uint64_t>(first->shape[1]), static_cast<uint64_t>(first->shape[0]),
                     static_cast<uint64_t>(n)},
                    type,
                    first->data,
                    first->n_bytes * static_cast<uint64_t>(n),
                    std::move(tf)};
    return Add(path, std::move(st));
  }

  std::string dir_;
  ModelConfig config_;
  SafetensorsCheckpoint ckpt_;
  std::vector<SourceTensor> tensors_;
  std::map<std::string, size_t> index_;
};

}  // namespace

Result<ModelConfig> ConfigFromGguf(const GgufFile& file) {
  FAK_ASSIGN_OR_RETURN(ModelConfig c, ModelConfigFromGguf(file));
  if (const Architecture* a = FindArchitecture(c.arch);
      a != nullptr && a->configure_from_tensors != nullptr) {
    a->configure_from_tensors(c, [&](const std::string& name) { return file.FindTensor(name) != nullptr; });
    Status v = c.Validate();
    if (!v.ok()) return v.WithContext(file.path());
  }
  return c;
}

std::string CanonicalTensorName(const std::string& hf_name, const std::string& arch) {
  const Architecture* a = FindArchitecture(arch);
  if (a == nullptr) return "";
  // Multimodal checkpoints (Qwen3.5) keep the language model under model.language_model.
  std::string hf = hf_name;
  if (hf.rfind("model.language_model.", 0) == 0) hf = "model." + hf.substr(21);
  for (const auto& [from, to] : a->hf_top) {
    if (hf == from) return to;
  }
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
  if (layer.empty() || layer.find_first_not_of("0123456789") != std::string::npos) return "";
  const std::string suffix = hf.substr(dot + 1);
  for (const auto& [from, to] : a->hf_layer) {
    if (suffix == from) return "blk." + layer + "." + to;
  }
  return "";
}

Status ReadCanonicalRow(const SourceTensor& t, int64_t r, int64_t cols, float* out,
                        std::vector<float>& scratch) {
  const SourceTransform* tf = t.transform.get();
  const int64_t stored = tf != nullptr && !tf->row_from.empty() ? tf->row_from[static_cast<size_t>(r)] : r;
  const auto row_bytes = GgmlRowBytes(t.type, static_cast<uint64_t>(cols));
  if (!row_bytes) {
    return Internal("tensor '{}': rows of {} do not fit {}", t.name, cols, GgmlTypeName(t.type));
  }
  const uint8_t* src = t.data + static_cast<uint64_t>(stored) * *row_bytes;
  if (tf != nullptr && !tf->parts.empty()) {
    const auto part = static_cast<size_t>(stored / tf->part_rows);
    if (part >= tf->parts.size()) {
      return Internal("tensor '{}': row {} past its {} parts", t.name, r, tf->parts.size());
    }
    src = tf->parts[part] + static_cast<uint64_t>(stored % tf->part_rows) * *row_bytes;
  }
  if (tf == nullptr || tf->col_from.empty()) {
    FAK_RETURN_IF_ERROR(DequantizeRow(t.type, src, out, cols));
  } else {
    scratch.resize(static_cast<size_t>(cols));
    FAK_RETURN_IF_ERROR(DequantizeRow(t.type, src, scratch.data(), cols));
    for (int64_t c = 0; c < cols; ++c) {
      out[c] = scratch[static_cast<size_t>(tf->col_from[static_cast<size_t>(c)])];
    }
  }
  if (tf != nullptr && tf->value == SourceTransform::kAddOne) {
    for (int64_t c = 0; c < cols; ++c) out[c] += 1.0f;
  } else if (tf != nullptr && tf->value == SourceTransform::kNegExp) {
    for (int64_t c = 0; c < cols; ++c) out[c] = -std::exp(out[c]);
  }
  return Status::Ok();
}

Result<std::unique_ptr<WeightSource>> OpenWeightSource(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return HfSource::Open(path);
  if (!fs::exists(path, ec)) return NotFound("{}: no such file or directory", path);
  if (path.ends_with(".safetensors")) return HfSource::Open(path);
  return GgufSource::Open(path);
}

}  // namespace fak
