#include "engine/convert/model_plan.h"

#include <array>

#include "engine/arch/arch.h"  // FindArchitecture, TensorSpec

namespace fak::convert {
namespace {

// Real geometries from the models' config.json files; `tiny` and `tiny-llama` are for tests.
// clang-format off
constexpr std::array<SynthGeometry, 12> kGeometries = {{
    // name            arch     layers  d     ffn    heads kv  hd   tied   rope   eps    ctx
    {"tiny",          "qwen2",  2,   256,   512,   4,  2,  64,  true,  1e6, 1e-6, 4096},
    {"tiny-llama",    "llama",  2,   256,   512,   4,  2,  64,  false, 5e5, 1e-5, 4096},
    {"qwen2.5-0.5b",  "qwen2",  24,  896,   4864,  14, 2,  64,  true,  1e6, 1e-6, 32768},
    {"qwen2.5-1.5b",  "qwen2",  28,  1536,  8960,  12, 2,  128, true,  1e6, 1e-6, 32768},
    {"qwen2.5-7b",    "qwen2",  28,  3584,  18944, 28, 4,  128, false, 1e6, 1e-6, 32768},
    {"llama3-8b",     "llama",  32,  4096,  14336, 32, 8,  128, false, 5e5, 1e-5, 8192},
    // hybrids                                                                          k  v heads
    {"tiny-hybrid",   "qwen3_5", 4,  256,   512,   4,  2,  64,  true,  1e7, 1e-6, 4096,  2, 4},
    {"qwen3.5-2b",    "qwen3_5", 24, 2048,  6144,  8,  2,  256, true,  1e7, 1e-6, 262144, 16, 16},
    {"qwen3.5-27b",   "qwen3_5", 64, 5120,  17408, 24, 4,  256, false, 1e7, 1e-6, 262144, 16, 48},
    // hybrids with experts (ffn: the experts' width)                                    experts used shared
    {"tiny-hybrid-moe", "qwen3_5_moe", 4, 256, 128, 4, 2, 64,  true,  1e7, 1e-6, 4096,  2, 4,  8,  2, 128, 128},
    {"qwen3.5-35b-a3b", "qwen3_5_moe", 40, 2048, 512, 16, 2, 256, false, 1e7, 1e-6, 262144, 16, 32, 256, 8, 512, 512},
    // The same layers, 8 of the 40: what a CPU benchmark on a small machine holds.
    {"qwen3.5-35b-a3b-8l", "qwen3_5_moe", 8, 2048, 512, 16, 2, 256, false, 1e7, 1e-6, 262144, 16, 32, 256, 8, 512, 512},
}};
// clang-format on

}  // namespace

const SynthGeometry* FindGeometry(std::string_view name) {
  for (const SynthGeometry& g : kGeometries) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

std::string GeometryNames() {
  std::string out;
  for (const SynthGeometry& g : kGeometries) out += (out.empty() ? "" : ", ") + std::string(g.name);
  return out;
}

bool IsWritableArch(std::string_view arch) {
  return arch == "llama" || arch == "qwen2" || arch == "qwen3" || arch == "qwen3_5" || arch == "qwen3_5_moe";
}

Result<ModelConfig> ConfigForGeometry(const SynthGeometry& g, std::string_view arch, int64_t vocab) {
  if (arch.empty()) arch = g.arch;
  if (!IsWritableArch(arch)) {
    return InvalidArgument("unknown architecture '{}' (want llama, qwen2, qwen3, qwen3_5 or qwen3_5_moe)",
                           arch);
  }
  if ((arch == "qwen3_5" || arch == "qwen3_5_moe") != (g.linear_n_key_head > 0) ||
      (arch == "qwen3_5_moe") != (g.n_expert > 0)) {
    return InvalidArgument("geometry '{}' is {}a hybrid {} experts; architecture '{}' does not fit it",
                           g.name, g.linear_n_key_head > 0 ? "" : "not ", g.n_expert > 0 ? "with" : "without",
                           arch);
  }
  ModelConfig c;
  c.arch = std::string(arch);
  c.n_layer = g.n_layer;
  c.d_model = g.d_model;
  c.d_ffn = g.d_ffn;
  c.n_head = g.n_head;
  c.n_kv_head = g.n_kv_head;
  c.head_dim = g.head_dim;
  c.vocab_size = vocab;
  c.max_context = g.context;
  c.norm_eps = g.norm_eps;
  c.rope.theta = g.rope_theta;
  c.tied_embeddings = g.tied_embeddings;
  c.qkv_bias = arch == "qwen2";
  c.qk_norm = arch == "qwen3" || c.hybrid();
  if (c.hybrid()) {
    c.rope.partial_rotary_factor = 0.25;
    c.linear_n_key_head = g.linear_n_key_head;
    c.linear_n_value_head = g.linear_n_value_head;
    c.linear_key_head_dim = c.linear_value_head_dim = g.head_dim == 64 ? 32 : 128;
    c.linear_conv_kernel = 4;
    for (int64_t l = 0; l < c.n_layer; ++l) c.layer_is_linear.push_back((l + 1) % 4 != 0);
  }
  if (g.n_expert > 0) {
    c.n_expert = g.n_expert;
    c.n_expert_used = g.n_expert_used;
    c.d_expert_ffn = g.d_expert_ffn;
    c.d_shared_expert_ffn = g.d_shared_expert_ffn;
    c.layer_is_moe.assign(static_cast<size_t>(c.n_layer), true);
  }
  FAK_RETURN_IF_ERROR(c.Validate());
  return c;
}

std::vector<PlannedTensor> PlanTensors(const ModelConfig& c) {
  std::vector<PlannedTensor> out;
  const Architecture* arch = FindArchitecture(c.arch);
  if (arch == nullptr) return out;
  for (const TensorSpec& t : arch->tensors(c)) {
    const auto rows = static_cast<uint64_t>(t.rows), cols = static_cast<uint64_t>(t.cols);
    PlannedTensor p{t.name, {cols, rows}, TensorKind::kMatrix};
    if (t.experts > 0) p.shape.push_back(static_cast<uint64_t>(t.experts));
    p.output = t.role == TensorRole::kOutput || (t.role == TensorRole::kEmbedding && c.tied_embeddings);
    p.more_bits = t.more_bits;
    p.rope_rows = t.rope_rows;
    if (t.role == TensorRole::kOutput && c.tied_embeddings) continue;
    if (t.role == TensorRole::kTable) p.kind = TensorKind::kTable;
    if (t.role == TensorRole::kNorm || t.role == TensorRole::kBias) {
      p.shape = {cols};
      p.kind = t.role == TensorRole::kNorm ? TensorKind::kNorm : TensorKind::kBias;
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace fak::convert
