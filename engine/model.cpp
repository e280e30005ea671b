#include "engine/model.h"

#include <algorithm>
#include <cmath>

#include "core/log.h"
#include "core/timer.h"
#include "engine/arch/arch.h"
#include "engine/weight_loader.h"
#include "quant/codec.h"

namespace fak {

Result<WeightQuant> WeightQuantFromName(const std::string& name) {
  if (name == "keep" || name.empty()) return WeightQuant::kKeep;
  if (name == "f32") return WeightQuant::kF32;
  if (name == "bf16") return WeightQuant::kBF16;
  if (name == "f16") return WeightQuant::kF16;
  if (name == "q8_0") return WeightQuant::kQ8_0;
  if (name == "q4_k") return WeightQuant::kQ4_K;
  return InvalidArgument("unknown weight format '{}' (want keep, f32, bf16, f16, q8_0 or q4_k)", name);
}

const char* WeightQuantName(WeightQuant q) {
  switch (q) {
    case WeightQuant::kKeep: return "keep";
    case WeightQuant::kF32: return "f32";
    case WeightQuant::kBF16: return "bf16";
    case WeightQuant::kF16: return "f16";
    case WeightQuant::kQ8_0: return "q8_0";
    case WeightQuant::kQ4_K: return "q4_k";
  }
  return "?";
}

std::vector<float> RopeInvFreq(const ModelConfig& c, const float* freq_factors) {
  int64_t rot =
      static_cast<int64_t>(std::lround(static_cast<double>(c.head_dim) * c.rope.partial_rotary_factor));
  rot -= rot % 2;
  const int64_t half = rot / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv[i] = 1.0 / std::pow(c.rope.theta, static_cast<double>(2 * i) / rot);
  const RopeConfig& r = c.rope;
  if (freq_factors != nullptr) {
    for (int64_t i = 0; i < half; ++i) inv[i] /= freq_factors[i];
  } else if (r.scaling == RopeScaling::kLinear) {
    for (auto& f : inv) f /= r.factor;
  } else if (r.scaling == RopeScaling::kLlama3) {
    const double orig = static_cast<double>(r.original_max_position > 0 ? r.original_max_position : 8192);
    const double low_wavelen = orig / r.low_freq_factor;
    const double high_wavelen = orig / r.high_freq_factor;
    for (auto& f : inv) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f /= r.factor;
      } else {
        const double smooth = (orig / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
        f = (1 - smooth) * f / r.factor + smooth * f;
      }
    }
  } else if (r.scaling == RopeScaling::kYarn) {
    const double orig =
        static_cast<double>(r.original_max_position > 0 ? r.original_max_position : c.max_context);
    auto correction_dim = [&](double n_rot) {
      return (rot * std::log(orig / (n_rot * 2 * M_PI))) / (2 * std::log(r.theta));
    };
    double lo = std::max(0.0, std::floor(correction_dim(r.beta_fast)));
    double hi = std::min(static_cast<double>(rot - 1), std::ceil(correction_dim(r.beta_slow)));
    if (lo == hi) hi += 0.001;
    for (int64_t i = 0; i < half; ++i) {
      const double ramp = std::clamp((static_cast<double>(i) - lo) / (hi - lo), 0.0, 1.0);
      const double extrapolation = 1.0 - ramp;
      inv[i] = (inv[i] / r.factor) * (1 - extrapolation) + inv[i] * extrapolation;
    }
  }
  return std::vector<float>(inv.begin(), inv.end());
}

double RopeAttnFactor(const ModelConfig& c) {
  if (c.rope.scaling != RopeScaling::kYarn) return 1.0;
  if (c.rope.attn_factor != 1.0) return c.rope.attn_factor;
  return c.rope.factor <= 1 ? 1.0 : 0.1 * std::log(c.rope.factor) + 1.0;
}

namespace {

// Loads every tensor of the architecture's list (run once to plan, once to load).
Status LoadTensors(Model& m, const std::vector<TensorSpec>& specs, WeightLoader& ld) {
  m.weights.clear();
  m.lookup_only_bytes = 0;
  m.expert_bytes = 0;
  const bool untied = ld.Has("output.weight");
  if (!untied && m.config.untied_stated) {
    return NotFound(
        "config.json says tie_word_embeddings is false, but the checkpoint has no output matrix "
        "(lm_head.weight); tying it to the embedding would produce other logits than the model's");
  }
  for (const TensorSpec& t : specs) {
    Weight w;
    const bool vector = t.role == TensorRole::kNorm || t.role == TensorRole::kBias;
    if (t.role == TensorRole::kEmbedding && !untied) {
      FAK_ASSIGN_OR_RETURN(auto tied, ld.TiedEmbedding(t.name, t.rows, t.cols, t.what));
      w = tied.lookup;
      m.embd_as = tied.lookup_as;
      m.weights["output.weight"] = tied.output;
    } else if (t.role == TensorRole::kEmbedding) {
      FAK_ASSIGN_OR_RETURN(w, ld.Matrix(t.name, t.rows, t.cols, t.what, /*embedding=*/true));
      m.embd_as = w.type;
      m.lookup_only_bytes = static_cast<uint64_t>(w.rows) * w.row_bytes;
    } else if ((t.role == TensorRole::kOutput && !untied) || (t.optional && !ld.Has(t.name))) {
      continue;  // tied outputs are bound with the embedding; optional tensors may be absent
    } else if (vector) {
      FAK_ASSIGN_OR_RETURN(w, ld.Vector(t.name, t.cols, t.what));
    } else if (t.role == TensorRole::kTable) {
      FAK_ASSIGN_OR_RETURN(w, ld.Table(t.name, t.rows, t.cols, t.what));
    } else if (t.experts > 0) {
      FAK_ASSIGN_OR_RETURN(w, ld.Experts(t.name, t.experts, t.rows, t.cols, t.what));
      m.expert_bytes += static_cast<uint64_t>(w.rows) * w.row_bytes;
    } else {
      FAK_ASSIGN_OR_RETURN(w, ld.Matrix(t.name, t.rows, t.cols, t.what));
    }
    m.weights[t.name] = w;
  }
  return Status::Ok();
}

}  // namespace

uint64_t DecodeStepBytes(const Model& m) {
  const ModelConfig& c = m.config;
  const uint64_t experts = c.n_expert > 0 ? m.expert_bytes / static_cast<uint64_t>(c.n_expert) *
                                                static_cast<uint64_t>(c.n_expert_used)
                                          : 0;
  return m.weight_bytes - m.lookup_only_bytes - m.expert_bytes + experts;
}

Weight ExpertMatrix(const Weight& stacked, int64_t n_expert, int64_t e, const WeightLayout& layout) {
  Weight w = stacked;
  w.rows = stacked.rows / n_expert;
  const size_t bytes = stacked.packed ? layout.Bytes(stacked.type, w.rows, w.cols)
                                      : static_cast<size_t>(w.rows) * stacked.row_bytes;
  w.data = stacked.data + static_cast<size_t>(e) * bytes;
  return w;
}

GgmlType MainWeightType(const Model& m) {
  std::map<GgmlType, uint64_t> bytes;
  for (const auto& [name, w] : m.weights) {
    if (w.rows > 1) bytes[w.type] += static_cast<uint64_t>(w.rows) * w.row_bytes;
  }
  GgmlType best = GgmlType::kF32;
  uint64_t most = 0;
  for (const auto& [type, n] : bytes) {
    if (n > most) best = type, most = n;
  }
  return best;
}

const Weight& Model::Get(const std::string& name) const {
  static const Weight kAbsent;
  auto it = weights.find(name);
  return it == weights.end() ? kAbsent : it->second;
}

Result<std::unique_ptr<Model>> LoadModelFrom(std::unique_ptr<WeightSource> source,
                                             const LoadOptions& options) {
  Timer timer;
  auto model = std::make_unique<Model>();
  model->config = source->config();
  const Architecture* arch = FindArchitecture(model->config.arch);
  if (arch == nullptr) {
    return Unsupported("architecture '{}' has no forward pass in fak yet", model->config.arch);
  }
  model->rope_neox = source->rope_neox();
  std::vector<float> factors;
  if (const SourceTensor* rf = source->Find("rope_freqs.weight")) {
    factors.resize(static_cast<size_t>(rf->shape[0]));
    FAK_RETURN_IF_ERROR(
        DequantizeRow(rf->type, rf->data, factors.data(), static_cast<int64_t>(factors.size())));
  }
  model->rope_inv_freq = RopeInvFreq(model->config, factors.empty() ? nullptr : factors.data());
  if (!factors.empty() && factors.size() != model->rope_inv_freq.size()) {
    return Corrupt("tensor 'rope_freqs.weight' has {} factors, want {} (rotary_dim / 2)", factors.size(),
                   model->rope_inv_freq.size());
  }
  model->rope_attn_factor = RopeAttnFactor(model->config);

  const std::vector<TensorSpec> specs = arch->tensors(model->config);
  WeightLoader loader(*source, options);
  FAK_RETURN_IF_ERROR(LoadTensors(*model, specs, loader));  // plan: sizes only
  FAK_ASSIGN_OR_RETURN(model->arena, WeightArena::Create(loader.planned_bytes(), options.huge_pages));
  loader.BeginLoad(&model->arena);
  FAK_RETURN_IF_ERROR(LoadTensors(*model, specs, loader));  // load: every weight is rebound
  model->weight_bytes = loader.loaded_bytes();
  model->source = std::move(source);
  model->load_seconds = timer.Seconds();
  FAK_LOG_DEBUG("loaded {} ({} layers, {:.1f} MiB of weights) in {:.2f} s", model->config.arch,
                model->config.n_layer, static_cast<double>(model->weight_bytes) / (1 << 20),
                model->load_seconds);
  return model;
}

Result<std::unique_ptr<Model>> LoadModel(const std::string& path, const LoadOptions& options) {
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source, OpenWeightSource(path));
  auto m = LoadModelFrom(std::move(source), options);
  if (!m.ok()) return m.status().WithContext(path);
  return m;
}

}  // namespace fak
