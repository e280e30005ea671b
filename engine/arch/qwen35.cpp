// The Qwen3.5 hybrid: Gated-DeltaNet (linear attention) layers interleaved with gated full-attention
// layers (three to one in the released models), each followed by a SwiGLU FFN. HF transformers calls
// it Qwen3_5ForCausalLM (model_type qwen3_5 / qwen3_5_text); llama.cpp calls it qwen35. Tensor names
// and layouts are llama.cpp's: HF checkpoints are mapped into them at load (zero-centred norms get
// their + 1, A_log becomes -exp(A_log), value heads go from grouped to tiled order).
//
// Full-attention layers: q_proj gives each head's query and an output gate side by side; per-head
// q/k RMSNorm; RoPE on the first part of each head (partial_rotary_factor); attention; output times
// sigmoid(gate). Linear layers: in_proj_qkv -> causal depthwise conv + SiLU -> the gated delta rule
// (state per value head), RMSNorm of each head gated by silu(in_proj_z), out_proj.
#include <cmath>

#include "engine/arch/arch.h"

namespace fak {
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
  // FFN
  kGate,
  kUp,
  kDown,
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
    {"ffn_gate.weight",            "mlp.gate_proj.weight"},
    {"ffn_up.weight",              "mlp.up_proj.weight"},
    {"ffn_down.weight",            "mlp.down_proj.weight"},
};
// clang-format on
constexpr const char* kEmbd = "token_embd.weight";
constexpr const char* kOutNorm = "output_norm.weight";
constexpr const char* kOut = "output.weight";

std::string LayerName(int64_t l, LayerTensor t) {
  return "blk." + std::to_string(l) + "." + kLayerNames[t].first;
}

bool IsLinear(const ModelConfig& c, int64_t l) { return c.layer_is_linear[static_cast<size_t>(l)]; }

DeltaNetSpec Spec(const ModelConfig& c) {
  DeltaNetSpec s;
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
    auto add = [&](LayerTensor t, int64_t rows, int64_t cols, R role, const char* what) {
      TensorSpec s{LayerName(l, t), rows, cols, role, what};
      s.more_bits = t == kWv || t == kQkv || t == kDown;
      out.push_back(std::move(s));
    };
    add(kAttnNorm, 1, d, R::kNorm, "d_model");
    if (IsLinear(c, l)) {
      add(kQkv, dn.conv_dim(), d, R::kMatrix, "2*n_k_head*k_dim + n_v_head*v_dim x d_model");
      add(kZ, value, d, R::kMatrix, "n_v_head*v_dim x d_model");
      add(kBeta, nv, d, R::kMatrix, "n_v_head x d_model");
      add(kAlpha, nv, d, R::kMatrix, "n_v_head x d_model");
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
    add(kGate, ffn, d, R::kMatrix, "d_ffn x d_model");
    add(kUp, ffn, d, R::kMatrix, "d_ffn x d_model");
    add(kDown, d, ffn, R::kMatrix, "d_model x d_ffn");
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

Status HybridHfTransform(const ModelConfig& c, SourceTensor& t) {
  const std::string& n = t.name;
  auto is = [&](LayerTensor lt) { return n.ends_with(std::string(".") + kLayerNames[lt].first); };
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
  if (nk > 0 && nv > nk) {
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
};

class Hybrid final : public ArchInstance {
 public:
  Hybrid(const ModelConfig& c, Backend& be) : c_(c), be_(be), dn_(Spec(c)) {}
  ~Hybrid() override {
    for (Tensor* t : {&x_, &xn_, &qg_, &q_, &gate_, &k_, &v_, &attn_, &o_, &fg_, &fu_, &qkv_, &z_, &core_,
                      &b_, &a_, &out_x_, &out_xn_}) {
      if (t->data != nullptr) be_.Free(*t);
    }
  }

  Status Bind(const Model& m) {
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
        const Weight& w = m.Get(LayerName(l, static_cast<LayerTensor>(t)));
        if (!w.present()) continue;  // the other kind of layer's tensors
        const bool matrix = t == kWq || t == kWk || t == kWv || t == kWo || t == kQkv || t == kZ ||
                            t == kBeta || t == kAlpha || t == kSsmOut || t == kGate || t == kUp || t == kDown;
        auto b = matrix ? be_.BindMatrix(w) : be_.BindVector(w);
        if (!b.ok()) return b.status().WithContext(LayerName(l, static_cast<LayerTensor>(t)));
        layer.w[t] = *b;
      }
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
                             {&a_, dn_.n_v_head}}) {
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
      be_.MatMulSwiGLU(layer.w[kGate], layer.w[kUp], xn, g, u);
      be_.MatMul(layer.w[kDown], g, o);
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
    be_.MatMul(w[kQkv], xn, qkv);
    be_.MatMul(w[kZ], xn, z);
    be_.MatMul(w[kBeta], xn, beta);
    be_.MatMul(w[kAlpha], xn, alpha);
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
  Tensor x_, xn_, qg_, q_, gate_, k_, v_, attn_, o_, fg_, fu_, qkv_, z_, core_, b_, a_, out_x_, out_xn_;
};

Result<std::unique_ptr<ArchInstance>> InstantiateHybrid(const Model& m, Backend& be) {
  auto a = std::make_unique<Hybrid>(m.config, be);
  FAK_RETURN_IF_ERROR(a->Bind(m));
  return std::unique_ptr<ArchInstance>(std::move(a));
}

}  // namespace

const Architecture& Qwen35Hybrid() {
  static const Architecture arch{
      "qwen3.5-hybrid",
      {"qwen3_5"},
      {{"model.embed_tokens.weight", kEmbd}, {"model.norm.weight", kOutNorm}, {"lm_head.weight", kOut}},
      HfToGgufNames(kLayerNames),
      &HybridTensors,
      &HybridCaches,
      nullptr,
      &HybridHfTransform,
      &InstantiateHybrid,
  };
  return arch;
}

}  // namespace fak
