// The Qwen3.5 / Qwen3-Next hybrids: Gated-DeltaNet (linear attention) layers interleaved with gated
// full-attention layers (three to one in the released models), each followed by a SwiGLU FFN or (Qwen3.5-MoE,
// Qwen3-Next) a mixture of experts. HF transformers calls them Qwen3_5ForCausalLM (model_type qwen3_5 /
// qwen3_5_text), Qwen3_5MoeForCausalLM (qwen3_5_moe / qwen3_5_moe_text) and Qwen3NextForCausalLM
// (qwen3_next); llama.cpp calls them qwen35, qwen35moe and qwen3next.
// Tensor names and layouts are llama.cpp's: HF checkpoints are mapped into them at load (zero-centred
// norms get their + 1, A_log becomes -exp(A_log); Qwen3.5's value heads go from grouped to tiled order,
// Qwen3-Next's per-key-head in_proj_qkvz is split into attn_qkv and attn_gate, its experts stacked).
//
// Full-attention layers: q_proj gives each head's query and an output gate side by side; per-head
// q/k RMSNorm; RoPE on the first part of each head (partial_rotary_factor); attention; output times
// sigmoid(gate). Linear layers: in_proj_qkv -> causal depthwise conv + SiLU -> the gated delta rule
// (state per value head), RMSNorm of each head gated by silu(in_proj_z), out_proj.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "engine/arch/arch.h"

namespace fak {
namespace qwen35 {
namespace {

enum LayerTensor {
  kAttnNorm,
  kPostNorm,
  // full attention
  kWq,
  kWk,
  kWv,
  kQNorm,
  kKNorm,
  kWo,
  // Gated-DeltaNet
  kQkv,
  kZ,
  kBeta,
  kAlpha,
  kConv,
  kDtBias,
  kSsmA,
  kSsmNorm,
  kSsmOut,
  kBa,  // Qwen3-Next: b and a of each key head's value heads side by side
  // FFN
  kGate,
  kUp,
  kDown,
  // mixture of experts (Qwen3.5-MoE, Qwen3-Next)
  kRouter,
  kGateExps,
  kUpExps,
  kDownExps,
  kSharedScale,
  kSharedGate,
  kSharedUp,
  kSharedDown,
  kNumLayerTensors
};
// clang-format off
constexpr std::pair<const char*, const char*> kLayerNames[kNumLayerTensors] = {
    {"attn_norm.weight",           "input_layernorm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight",              "self_attn.q_proj.weight"},
    {"attn_k.weight",              "self_attn.k_proj.weight"},
    {"attn_v.weight",              "self_attn.v_proj.weight"},
    {"attn_q_norm.weight",         "self_attn.q_norm.weight"},
    {"attn_k_norm.weight",         "self_attn.k_norm.weight"},
    {"attn_output.weight",         "self_attn.o_proj.weight"},
    {"attn_qkv.weight",            "linear_attn.in_proj_qkv.weight"},
    {"attn_gate.weight",           "linear_attn.in_proj_z.weight"},
    {"ssm_beta.weight",            "linear_attn.in_proj_b.weight"},
    {"ssm_alpha.weight",           "linear_attn.in_proj_a.weight"},
    {"ssm_conv1d.weight",          "linear_attn.conv1d.weight"},
    {"ssm_dt.bias",                "linear_attn.dt_bias"},
    {"ssm_a",                      "linear_attn.A_log"},
    {"ssm_norm.weight",            "linear_attn.norm.weight"},
    {"ssm_out.weight",             "linear_attn.out_proj.weight"},
    {"ssm_ba.weight",              "linear_attn.in_proj_ba.weight"},
    {"ffn_gate.weight",            "mlp.gate_proj.weight"},
    {"ffn_up.weight",              "mlp.up_proj.weight"},
    {"ffn_down.weight",            "mlp.down_proj.weight"},
    {"ffn_gate_inp.weight",        "mlp.gate.weight"},
    {"ffn_gate_exps.weight",       nullptr},  // stacked from mlp.experts.N.*: kExpertNames
    {"ffn_up_exps.weight",         nullptr},
    {"ffn_down_exps.weight",       nullptr},
    {"ffn_gate_inp_shexp.weight",  "mlp.shared_expert_gate.weight"},
    {"ffn_gate_shexp.weight",      "mlp.shared_expert.gate_proj.weight"},
    {"ffn_up_shexp.weight",        "mlp.shared_expert.up_proj.weight"},
    {"ffn_down_shexp.weight",      "mlp.shared_expert.down_proj.weight"},
};
// clang-format on
constexpr const char* kQkvzHf = "linear_attn.in_proj_qkvz.weight";  // Qwen3-Next: q, k, v, z per key head

bool IsNext(const ModelConfig& c) { return c.arch == "qwen3_next"; }

// HF -> GGUF per-layer names: the table's, with Qwen3-Next's fused q/k/v/z projection for attn_qkv
// (attn_gate comes from the same stored matrix, HybridHfTransform).
std::vector<std::pair<const char*, const char*>> HfNames(bool next) {
  std::vector<std::pair<const char*, const char*>> out;
  for (int t = 0; t < kNumLayerTensors; ++t) {
    const auto [gguf, hf] = kLayerNames[t];
    if (hf == nullptr) continue;
    if (next && t == kQkv) {
      out.emplace_back(kQkvzHf, gguf);
    } else if (!next || (t != kZ && t != kBeta && t != kAlpha)) {
      out.emplace_back(hf, gguf);
    }
  }
  return out;
}
constexpr const char* kEmbd = "token_embd.weight";
constexpr const char* kOutNorm = "output_norm.weight";
constexpr const char* kOut = "output.weight";

std::string LayerName(int64_t l, LayerTensor t) {
  return "blk." + std::to_string(l) + "." + kLayerNames[t].first;
}

bool IsLinear(const ModelConfig& c, int64_t l) { return c.layer_is_linear[static_cast<size_t>(l)]; }

DeltaNetSpec Spec(const ModelConfig& c) {
  DeltaNetSpec s;
  s.grouped = IsNext(c);
  s.n_k_head = c.linear_n_key_head;
  s.n_v_head = c.linear_n_value_head;
  s.k_dim = c.linear_key_head_dim;
  s.v_dim = c.linear_value_head_dim;
  s.conv_kernel = c.linear_conv_kernel;
  s.eps = static_cast<float>(c.norm_eps);
  return s;
}

std::vector<TensorSpec> HybridTensors(const ModelConfig& c) {
  const int64_t d = c.d_model, hd = c.head_dim, q = c.n_head * hd, kv = c.n_kv_head * hd, ffn = c.d_ffn;
  const DeltaNetSpec dn = Spec(c);
  const int64_t nv = dn.n_v_head, value = nv * dn.v_dim;
  using R = TensorRole;
  std::vector<TensorSpec> out;
  out.push_back({kEmbd, c.vocab_size, d, R::kEmbedding, "vocab x d_model"});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    auto add = [&](LayerTensor t, int64_t rows, int64_t cols, R role, const char* what, int64_t experts = 0) {
      TensorSpec s{LayerName(l, t), rows, cols, role, what};
      s.more_bits = t == kWv || t == kQkv || t == kDown || t == kDownExps || t == kSharedDown;
      s.experts = experts;
      out.push_back(std::move(s));
    };
    add(kAttnNorm, 1, d, R::kNorm, "d_model");
    if (IsLinear(c, l)) {
      add(kQkv, dn.conv_dim(), d, R::kMatrix, "2*n_k_head*k_dim + n_v_head*v_dim x d_model");
      add(kZ, value, d, R::kMatrix, "n_v_head*v_dim x d_model");
      if (IsNext(c)) {
        add(kBa, 2 * nv, d, R::kMatrix, "2*n_v_head x d_model");
      } else {
        add(kBeta, nv, d, R::kMatrix, "n_v_head x d_model");
        add(kAlpha, nv, d, R::kMatrix, "n_v_head x d_model");
      }
      add(kConv, dn.conv_dim(), dn.conv_kernel, R::kTable, "conv channels x conv kernel");
      add(kDtBias, 1, nv, R::kBias, "n_v_head");
      add(kSsmA, 1, nv, R::kBias, "n_v_head");
      add(kSsmNorm, 1, dn.v_dim, R::kNorm, "v_dim");
      add(kSsmOut, d, value, R::kMatrix, "d_model x n_v_head*v_dim");
    } else {
      add(kWq, 2 * q, d, R::kMatrix, "2*n_head*head_dim (query and gate) x d_model");
      add(kWk, kv, d, R::kMatrix, "n_kv_head*head_dim x d_model");
      add(kWv, kv, d, R::kMatrix, "n_kv_head*head_dim x d_model");
      add(kQNorm, 1, hd, R::kNorm, "head_dim");
      add(kKNorm, 1, hd, R::kNorm, "head_dim");
      add(kWo, d, q, R::kMatrix, "d_model x n_head*head_dim");
    }
    add(kPostNorm, 1, d, R::kNorm, "d_model");
    if (c.moe_layer(l)) {
      const int64_t e = c.n_expert, ef = c.d_expert_ffn, sf = c.d_shared_expert_ffn;
      // The router stays f32 (llama.cpp never quantizes it): which experts run hangs on it.
      add(kRouter, e, d, R::kTable, "n_expert x d_model");
      add(kGateExps, ef, d, R::kMatrix, "n_expert x d_expert_ffn x d_model", e);
      add(kUpExps, ef, d, R::kMatrix, "n_expert x d_expert_ffn x d_model", e);
      add(kDownExps, d, ef, R::kMatrix, "n_expert x d_model x d_expert_ffn", e);
      if (sf > 0) {
        add(kSharedScale, 1, d, R::kBias, "d_model");
        add(kSharedGate, sf, d, R::kMatrix, "d_shared_expert_ffn x d_model");
        add(kSharedUp, sf, d, R::kMatrix, "d_shared_expert_ffn x d_model");
        add(kSharedDown, d, sf, R::kMatrix, "d_model x d_shared_expert_ffn");
      }
    } else {
      add(kGate, ffn, d, R::kMatrix, "d_ffn x d_model");
      add(kUp, ffn, d, R::kMatrix, "d_ffn x d_model");
      add(kDown, d, ffn, R::kMatrix, "d_model x d_ffn");
    }
  }
  out.push_back({kOutNorm, 1, d, R::kNorm, "d_model"});
  out.push_back({kOut, c.vocab_size, d, R::kOutput, "vocab x d_model", /*optional=*/c.tied_embeddings});
  return out;
}

std::vector<LayerCache> HybridCaches(const ModelConfig& c) {
  std::vector<LayerCache> out;
  const size_t state = Spec(c).StateBytes();
  for (int64_t l = 0; l < c.n_layer; ++l) {
    out.push_back(IsLinear(c, l) ? LayerCache{LayerCache::kState, state} : LayerCache{LayerCache::kKv});
  }
  return out;
}

// HF stores value heads grouped by key head (head g * per_k + j); llama.cpp's kernels broadcast the
// key heads tiled (head j * n_k + g). The stored index of tiled unit u, in units of `size` values.
int64_t GroupedIndex(int64_t u, int64_t size, int64_t n_k, int64_t per_k) {
  const int64_t head = u / size, within = u % size;
  const int64_t j = head / n_k, g = head % n_k;
  return (g * per_k + j) * size + within;
}

// Qwen3-Next's in_proj_qkvz holds per key head q (k_dim rows), k (k_dim), v and z (per_k * v_dim each):
// attn_qkv takes every head's q, then every k, then every v (value heads stay grouped), attn_gate the z.
Status SplitQkvz(const ModelConfig& c, SourceTensor& t, std::vector<SourceTensor>& more) {
  const int64_t nk = c.linear_n_key_head, dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  const int64_t per_k = c.linear_n_value_head / nk, block = 2 * dk + 2 * per_k * dv;
  if (t.shape.size() != 2 || static_cast<int64_t>(t.shape[1]) != nk * block) {
    return Corrupt("tensor '{}' has {} rows, want {} (q, k, v and z of {} key heads)", t.source_name,
                   t.shape.size() == 2 ? t.shape[1] : 0, nk * block, nk);
  }
  auto qkv = std::make_shared<SourceTransform>(), z = std::make_shared<SourceTransform>();
  for (int64_t part = 0; part < 2; ++part) {  // q, then k
    for (int64_t g = 0; g < nk; ++g) {
      for (int64_t i = 0; i < dk; ++i) qkv->row_from.push_back(g * block + part * dk + i);
    }
  }
  for (int64_t g = 0; g < nk; ++g) {
    for (int64_t i = 0; i < per_k * dv; ++i) {
      qkv->row_from.push_back(g * block + 2 * dk + i);
      z->row_from.push_back(g * block + 2 * dk + per_k * dv + i);
    }
  }
  const uint64_t row_bytes = t.n_bytes / t.shape[1];
  SourceTensor gate = t;
  gate.name = t.name.substr(0, t.name.find('.', 4) + 1) + kLayerNames[kZ].first;  // "blk.N." + attn_gate
  gate.shape[1] = z->row_from.size();
  gate.n_bytes = row_bytes * gate.shape[1];
  gate.transform = std::move(z);
  t.shape[1] = qkv->row_from.size();
  t.n_bytes = row_bytes * t.shape[1];
  t.transform = std::move(qkv);
  more.push_back(std::move(gate));
  return Status::Ok();
}

Status HybridHfTransform(const ModelConfig& c, SourceTensor& t, std::vector<SourceTensor>& more) {
  const std::string& n = t.name;
  auto is = [&](LayerTensor lt) { return n.ends_with(std::string(".") + kLayerNames[lt].first); };
  if (IsNext(c) && is(kQkv)) return SplitQkvz(c, t, more);
  // The shared expert's gate is one row: stored (1, d), a vector in GGUF.
  if (is(kSharedScale) && t.shape.size() == 2 && t.shape[1] == 1) t.shape = {t.shape[0]};
  auto tf = std::make_shared<SourceTransform>();
  // Zero-centred RMSNorm weights (scale 1 + w), except the gated norm's.
  if (n == kOutNorm || is(kAttnNorm) || is(kPostNorm) || is(kQNorm) || is(kKNorm)) {
    tf->value = SourceTransform::kAddOne;
  }
  if (is(kSsmA)) tf->value = SourceTransform::kNegExp;
  if (is(kConv)) {
    // (conv_dim, 1, kernel) as stored: the middle dimension goes.
    if (t.shape.size() == 3 && t.shape[1] == 1) t.shape = {t.shape[0], t.shape[2]};
  }
  const int64_t nk = c.linear_n_key_head, nv = c.linear_n_value_head, dv = c.linear_value_head_dim;
  if (nk > 0 && nv > nk && !IsNext(c)) {  // Qwen3-Next keeps the grouped order (DeltaNetSpec::grouped)
    const int64_t per_k = nv / nk, key = 2 * nk * c.linear_key_head_dim;
    auto rows = [&](int64_t first, int64_t count, int64_t size) {
      tf->row_from.resize(static_cast<size_t>(first + count));
      for (int64_t r = 0; r < first; ++r) tf->row_from[static_cast<size_t>(r)] = r;
      for (int64_t u = 0; u < count; ++u) {
        tf->row_from[static_cast<size_t>(first + u)] = first + GroupedIndex(u, size, nk, per_k);
      }
    };
    auto cols = [&](int64_t count, int64_t size) {
      tf->col_from.resize(static_cast<size_t>(count));
      for (int64_t u = 0; u < count; ++u) {
        tf->col_from[static_cast<size_t>(u)] = GroupedIndex(u, size, nk, per_k);
      }
    };
    if (is(kQkv) || is(kConv)) rows(key, nv * dv, dv);  // only the value rows/channels move
    if (is(kZ)) rows(0, nv * dv, dv);
    if (is(kBeta) || is(kAlpha)) rows(0, nv, 1);
    if (is(kSsmA) || is(kDtBias)) cols(nv, 1);  // vectors: one row
    if (is(kSsmOut)) cols(nv * dv, dv);
  }
  if (tf->value != SourceTransform::kNone || !tf->row_from.empty() || !tf->col_from.empty()) t.transform = tf;
  return Status::Ok();
}

struct Layer {
  BoundWeight w[kNumLayerTensors];
  int32_t delta_net = -1;  // linear layers
  int64_t kv_layer = -1;   // full-attention layers: their index in the KV store
  int32_t moe = -1;        // mixture-of-experts FFNs
};

// Configured from a GGUF file's tensors: which layers have experts.
void HybridConfigure(ModelConfig& c, const std::function<bool(const std::string&)>& has_tensor) {
  if (c.n_expert <= 0) return;
  c.layer_is_moe.clear();
  bool shared = false;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    c.layer_is_moe.push_back(has_tensor(LayerName(l, kRouter)));
    shared = shared || has_tensor(LayerName(l, kSharedScale));
  }
  // Without expert_shared_feed_forward_length llama.cpp gives the shared expert the FFN width.
  if (shared && c.d_shared_expert_ffn == 0) c.d_shared_expert_ffn = c.d_ffn;
}

class Hybrid final : public ArchInstance {
 public:
  Hybrid(const ModelConfig& c, Backend& be) : c_(c), be_(be), dn_(Spec(c)) {}
  ~Hybrid() override {
    for (Tensor* t : {&x_, &xn_, &qg_, &q_, &gate_, &k_, &v_, &attn_, &o_, &fg_, &fu_, &qkv_, &z_, &core_,
                      &b_, &a_, &ba_, &out_x_, &out_xn_}) {
      if (t->data != nullptr) be_.Free(*t);
    }
  }

  Status Bind(const Model& m) {
    if (std::find(c_.layer_is_moe.begin(), c_.layer_is_moe.end(), true) != c_.layer_is_moe.end() &&
        !be_.RunsMoe()) {
      return Unsupported("the {} backend does not run mixture-of-experts layers yet (this {} model has them)",
                         be_.name(), c_.arch);
    }
    FAK_ASSIGN_OR_RETURN(embd_, be_.BindEmbedding(m.Get(kEmbd), m.embd_as));
    FAK_ASSIGN_OR_RETURN(out_norm_, be_.BindVector(m.Get(kOutNorm)));
    FAK_ASSIGN_OR_RETURN(out_, be_.BindMatrix(m.Get(kOut)));
    if (embd_.cols != c_.d_model || out_.rows != c_.vocab_size) {
      return Internal("embedding/output shapes disagree");
    }
    layers_.resize(static_cast<size_t>(c_.n_layer));
    size_t state_offset = 0;
    int64_t kv_layer = 0;
    for (int64_t l = 0; l < c_.n_layer; ++l) {
      Layer& layer = layers_[static_cast<size_t>(l)];
      for (int t = 0; t < kNumLayerTensors; ++t) {
        if (t == kGateExps || t == kUpExps || t == kDownExps) continue;  // bound per expert below
        const Weight& w = m.Get(LayerName(l, static_cast<LayerTensor>(t)));
        if (!w.present()) continue;  // the other kind of layer's tensors
        const bool matrix = t == kWq || t == kWk || t == kWv || t == kWo || t == kQkv || t == kZ ||
                            t == kBeta || t == kAlpha || t == kBa || t == kSsmOut || t == kGate || t == kUp ||
                            t == kDown || t == kRouter || t == kSharedGate || t == kSharedUp ||
                            t == kSharedDown;
        auto b = matrix ? be_.BindMatrix(w) : be_.BindVector(w);
        if (!b.ok()) return b.status().WithContext(LayerName(l, static_cast<LayerTensor>(t)));
        layer.w[t] = *b;
      }
      if (c_.moe_layer(l)) FAK_RETURN_IF_ERROR(BindMoe(m, l, layer));
      if (IsLinear(c_, l)) {
        DeltaNetSpec s = dn_;
        s.state_offset = state_offset;
        state_offset += s.StateBytes();
        FAK_ASSIGN_OR_RETURN(layer.delta_net, be_.BindDeltaNet(s));
      } else {
        layer.kv_layer = kv_layer++;
      }
    }
    RopeSpec rope{m.rope_inv_freq, m.rope_neox, static_cast<float>(m.rope_attn_factor)};
    FAK_ASSIGN_OR_RETURN(rope_, be_.BindRope(rope));
    return Status::Ok();
  }

  Status BindMoe(const Model& m, int64_t l, Layer& layer) {
    MoeSpec spec;
    spec.n_expert = c_.n_expert;
    spec.n_used = c_.n_expert_used;
    spec.norm_top_k = c_.norm_top_k;
    spec.router = layer.w[kRouter];
    spec.shared_gate = layer.w[kSharedGate];
    spec.shared_up = layer.w[kSharedUp];
    spec.shared_down = layer.w[kSharedDown];
    spec.shared_scale = layer.w[kSharedScale];
    for (auto [t, out] : {std::pair{kGateExps, &spec.gate}, {kUpExps, &spec.up}, {kDownExps, &spec.down}}) {
      const std::string name = LayerName(l, t);
      for (int64_t e = 0; e < c_.n_expert; ++e) {
        auto b = be_.BindMatrix(ExpertMatrix(m.Get(name), c_.n_expert, e, be_.layout()));
        if (!b.ok()) return b.status().WithContext(fmt::format("{} expert {}", name, e));
        out->push_back(*b);
      }
    }
    auto id = be_.BindMoe(spec);
    if (!id.ok()) return id.status().WithContext(fmt::format("layer {}", l));
    layer.moe = *id;
    return Status::Ok();
  }

  Status Reserve(int64_t max_rows, int64_t max_out) override {
    if (max_rows > rows_) {
      const int64_t n = max_rows, q = c_.n_head * c_.head_dim, kv = c_.n_kv_head * c_.head_dim;
      const int64_t value = dn_.n_v_head * dn_.v_dim;
      for (auto [t, cols] : {std::pair{&x_, c_.d_model},
                             {&xn_, c_.d_model},
                             {&qg_, 2 * q},
                             {&q_, q},
                             {&gate_, q},
                             {&k_, kv},
                             {&v_, kv},
                             {&attn_, q},
                             {&o_, c_.d_model},
                             {&fg_, c_.d_ffn},
                             {&fu_, c_.d_ffn},
                             {&qkv_, dn_.conv_dim()},
                             {&z_, value},
                             {&core_, value},
                             {&b_, dn_.n_v_head},
                             {&a_, dn_.n_v_head},
                             {&ba_, 2 * dn_.n_v_head}}) {
        FAK_RETURN_IF_ERROR(Realloc(*t, n, cols));
      }
      rows_ = max_rows;
    }
    if (max_out > outs_) {
      FAK_RETURN_IF_ERROR(Realloc(out_x_, max_out, c_.d_model));
      FAK_RETURN_IF_ERROR(Realloc(out_xn_, max_out, c_.d_model));
      outs_ = max_out;
    }
    return Status::Ok();
  }

  void Forward(const BatchPlan& b, int32_t kv, int32_t states, Tensor logits) override {
    const int64_t n = static_cast<int64_t>(b.tokens.size()), n_out = static_cast<int64_t>(b.out_rows.size());
    const float eps = static_cast<float>(c_.norm_eps);
    const Tensor x = x_.Rows(0, n), xn = xn_.Rows(0, n), o = o_.Rows(0, n);
    be_.Embed(embd_, x);
    Probe("embedding", -1, x);
    for (int64_t l = 0; l < c_.n_layer; ++l) {
      const Layer& layer = layers_[static_cast<size_t>(l)];
      be_.RmsNorm(x, layer.w[kAttnNorm], xn, eps);
      if (layer.delta_net >= 0) {
        LinearAttention(layer, n, states, xn, o);
      } else {
        FullAttention(layer, n, kv, xn, o);
      }
      be_.Add(x, o);
      Probe("attention", l, x);
      const Tensor g = fg_.Rows(0, n), u = fu_.Rows(0, n);
      be_.RmsNorm(x, layer.w[kPostNorm], xn, eps);
      if (layer.moe >= 0) {
        be_.MoeFfn(layer.moe, xn, o);
      } else {
        be_.MatMulSwiGLU(layer.w[kGate], layer.w[kUp], xn, g, u);
        be_.MatMul(layer.w[kDown], g, o);
      }
      be_.Add(x, o);
      Probe("ffn", l, x);
    }
    if (n_out == 0) return;
    const Tensor ox = out_x_.Rows(0, n_out), oxn = out_xn_.Rows(0, n_out);
    be_.GatherOutRows(x, ox);
    be_.RmsNorm(ox, out_norm_, oxn, eps);
    be_.MatMul(out_, oxn, logits.Rows(0, n_out));
    Probe("logits", -1, logits.Rows(0, n_out));
  }

 private:
  void FullAttention(const Layer& layer, int64_t n, int32_t kv, Tensor xn, Tensor o) {
    const BoundWeight* w = layer.w;
    const int64_t hd = c_.head_dim;
    const float eps = static_cast<float>(c_.norm_eps), scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const Tensor qg = qg_.Rows(0, n), q = q_.Rows(0, n), gate = gate_.Rows(0, n), k = k_.Rows(0, n),
                 v = v_.Rows(0, n), attn = attn_.Rows(0, n);
    be_.MatMul(w[kWq], xn, qg);
    be_.SplitHeads(qg, hd, q, gate);
    be_.MatMul(w[kWk], xn, k);
    be_.MatMul(w[kWv], xn, v);
    be_.RmsNorm(q.Reshaped(hd), w[kQNorm], q.Reshaped(hd), eps);
    be_.RmsNorm(k.Reshaped(hd), w[kKNorm], k.Reshaped(hd), eps);
    be_.Rope(q, hd, rope_);
    be_.Rope(k, hd, rope_);
    be_.KvWrite(kv, layer.kv_layer, k, v);
    be_.Attention(kv, layer.kv_layer, q, scale, attn);
    be_.SigmoidMul(attn, gate);
    be_.MatMul(w[kWo], attn, o);
  }

  void LinearAttention(const Layer& layer, int64_t n, int32_t states, Tensor xn, Tensor o) {
    const BoundWeight* w = layer.w;
    const Tensor qkv = qkv_.Rows(0, n), z = z_.Rows(0, n), core = core_.Rows(0, n), beta = b_.Rows(0, n),
                 alpha = a_.Rows(0, n);
    if (w[kBa].present()) {  // per key head: b of its value heads, then a
      const Tensor ba = ba_.Rows(0, n);
      const BoundWeight in_w[] = {w[kQkv], w[kZ], w[kBa]};
      const Tensor in_y[] = {qkv, z, ba};
      be_.MatMuls(xn, in_w, in_y);
      be_.SplitHeads(ba, dn_.n_v_head / dn_.n_k_head, beta, alpha);
    } else {
      const BoundWeight in_w[] = {w[kQkv], w[kZ], w[kBeta], w[kAlpha]};
      const Tensor in_y[] = {qkv, z, beta, alpha};
      be_.MatMuls(xn, in_w, in_y);
    }
    be_.DeltaNetConv(states, layer.delta_net, qkv, w[kConv]);
    be_.DeltaNetRule(states, layer.delta_net, qkv, beta, alpha, w[kSsmA], w[kDtBias], core);
    be_.GatedRmsNorm(core.Reshaped(dn_.v_dim), w[kSsmNorm], z.Reshaped(dn_.v_dim),
                     static_cast<float>(c_.norm_eps));
    be_.MatMul(w[kSsmOut], core, o);
  }

  Status Realloc(Tensor& t, int64_t rows, int64_t cols) { return ReallocActivation(be_, t, rows, cols); }

  const ModelConfig& c_;
  Backend& be_;
  const DeltaNetSpec dn_;
  BoundWeight embd_, out_norm_, out_;
  std::vector<Layer> layers_;
  int32_t rope_ = -1;
  int64_t rows_ = 0, outs_ = 0;
  Tensor x_, xn_, qg_, q_, gate_, k_, v_, attn_, o_, fg_, fu_, qkv_, z_, core_, b_, a_, ba_, out_x_, out_xn_;
};

Result<std::unique_ptr<ArchInstance>> InstantiateHybrid(const Model& m, Backend& be) {
  auto a = std::make_unique<Hybrid>(m.config, be);
  FAK_RETURN_IF_ERROR(a->Bind(m));
  return std::unique_ptr<ArchInstance>(std::move(a));
}

// The two families differ in their HF names only (Qwen3-Next's fused projections); the per-expert HF
// tensors under mlp.experts.N. are stacked in both.
Architecture HybridArchitecture(const char* name, std::vector<std::string> handles, bool next) {
  return Architecture{
      name,
      std::move(handles),
      {{"model.embed_tokens.weight", kEmbd}, {"model.norm.weight", kOutNorm}, {"lm_head.weight", kOut}},
      HfNames(next),
      {{"gate_proj.weight", "ffn_gate_exps.weight"},
       {"up_proj.weight", "ffn_up_exps.weight"},
       {"down_proj.weight", "ffn_down_exps.weight"}},
      &HybridTensors,
      &HybridCaches,
      &HybridConfigure,
      &HybridHfTransform,
      &InstantiateHybrid,
  };
}

}  // namespace
}  // namespace qwen35

const Architecture& Qwen35Hybrid() {
  static const Architecture arch =
      qwen35::HybridArchitecture("qwen3.5-hybrid", {"qwen3_5", "qwen3_5_moe"}, false);
  return arch;
}

const Architecture& Qwen3NextHybrid() {
  static const Architecture arch = qwen35::HybridArchitecture("qwen3-next-hybrid", {"qwen3_next"}, true);
  return arch;
}

}  // namespace fak
