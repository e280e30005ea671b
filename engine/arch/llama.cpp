// The Llama family: Llama 2/3 (GQA, RoPE with llama3/linear/YaRN scaling, SwiGLU, RMSNorm, tied or
// untied output), Qwen2 (q/k/v biases) and Qwen3 (per-head q/k RMSNorm). One forward pass covers all
// of them; which pieces run is decided by the tensors the model has. Every llama tensor name lives
// in this file.
#include <cmath>

#include "engine/arch/arch.h"

namespace fak {
namespace {

// Per-layer tensors: GGUF suffix under "blk.N.", HF suffix under "model.layers.N.".
enum LayerTensor {
  kAttnNorm,
  kWq,
  kWk,
  kWv,
  kBq,
  kBk,
  kBv,
  kQNorm,
  kKNorm,
  kWo,
  kFfnNorm,
  kGate,
  kUp,
  kDown,
  kNumLayerTensors
};
// clang-format off
constexpr std::pair<const char*, const char*> kLayerNames[kNumLayerTensors] = {
    {"attn_norm.weight",   "input_layernorm.weight"},
    {"attn_q.weight",      "self_attn.q_proj.weight"},
    {"attn_k.weight",      "self_attn.k_proj.weight"},
    {"attn_v.weight",      "self_attn.v_proj.weight"},
    {"attn_q.bias",        "self_attn.q_proj.bias"},
    {"attn_k.bias",        "self_attn.k_proj.bias"},
    {"attn_v.bias",        "self_attn.v_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight",    "post_attention_layernorm.weight"},
    {"ffn_gate.weight",    "mlp.gate_proj.weight"},
    {"ffn_up.weight",      "mlp.up_proj.weight"},
    {"ffn_down.weight",    "mlp.down_proj.weight"},
};
// clang-format on
constexpr const char* kEmbd = "token_embd.weight";
constexpr const char* kOutNorm = "output_norm.weight";
constexpr const char* kOut = "output.weight";

std::string LayerName(int64_t l, LayerTensor t) {
  return "blk." + std::to_string(l) + "." + kLayerNames[t].first;
}

std::vector<TensorSpec> LlamaTensors(const ModelConfig& c) {
  const int64_t d = c.d_model, hd = c.head_dim, q = c.n_head * hd, kv = c.n_kv_head * hd, ffn = c.d_ffn;
  using R = TensorRole;
  std::vector<TensorSpec> out;
  out.push_back({kEmbd, c.vocab_size, d, R::kEmbedding, "vocab x d_model"});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    auto add = [&](LayerTensor t, int64_t rows, int64_t cols, R role, const char* what) {
      TensorSpec s{LayerName(l, t), rows, cols, role, what};
      s.more_bits = t == kWv || t == kDown;
      s.rope_rows = t == kWq || t == kWk || t == kBq || t == kBk;
      out.push_back(std::move(s));
    };
    add(kAttnNorm, 1, d, R::kNorm, "d_model");
    add(kWq, q, d, R::kMatrix, "n_head*head_dim x d_model");
    add(kWk, kv, d, R::kMatrix, "n_kv_head*head_dim x d_model");
    add(kWv, kv, d, R::kMatrix, "n_kv_head*head_dim x d_model");
    if (c.qkv_bias) {
      add(kBq, 1, q, R::kBias, "n_head*head_dim");
      add(kBk, 1, kv, R::kBias, "n_kv_head*head_dim");
      add(kBv, 1, kv, R::kBias, "n_kv_head*head_dim");
    }
    if (c.qk_norm) {
      add(kQNorm, 1, hd, R::kNorm, "head_dim");
      add(kKNorm, 1, hd, R::kNorm, "head_dim");
    }
    add(kWo, d, q, R::kMatrix, "d_model x n_head*head_dim");
    add(kFfnNorm, 1, d, R::kNorm, "d_model");
    add(kGate, ffn, d, R::kMatrix, "d_ffn x d_model");
    add(kUp, ffn, d, R::kMatrix, "d_ffn x d_model");
    add(kDown, d, ffn, R::kMatrix, "d_model x d_ffn");
  }
  out.push_back({kOutNorm, 1, d, R::kNorm, "d_model"});
  out.push_back({kOut, c.vocab_size, d, R::kOutput, "vocab x d_model", /*optional=*/c.tied_embeddings});
  return out;
}

std::vector<LayerCache> LlamaCaches(const ModelConfig& c) {
  return std::vector<LayerCache>(static_cast<size_t>(c.n_layer), LayerCache{LayerCache::kKv});
}

// Qwen2's q/k/v biases and Qwen3's q/k norms, seen in layer 0.
void LlamaConfigure(ModelConfig& c, const std::function<bool(const std::string&)>& has_tensor) {
  c.qkv_bias = has_tensor(LayerName(0, kBq));
  c.qk_norm = has_tensor(LayerName(0, kQNorm));
}

struct Layer {
  BoundWeight w[kNumLayerTensors];
};

class Llama final : public ArchInstance {
 public:
  Llama(const ModelConfig& c, Backend& be) : c_(c), be_(be) {}
  ~Llama() override {
    for (Tensor* t : {&x_, &xn_, &q_, &k_, &v_, &attn_, &o_, &gate_, &up_, &out_x_, &out_xn_}) {
      if (t->data != nullptr) be_.Free(*t);
    }
  }

  Status Bind(const Model& m) {
    const int64_t d = c_.d_model;
    FAK_ASSIGN_OR_RETURN(embd_, be_.BindEmbedding(m.Get(kEmbd), m.embd_as));
    FAK_ASSIGN_OR_RETURN(out_norm_, be_.BindVector(m.Get(kOutNorm)));
    FAK_ASSIGN_OR_RETURN(out_, be_.BindMatrix(m.Get(kOut)));
    if (embd_.cols != d || out_.rows != c_.vocab_size) return Internal("embedding/output shapes disagree");
    layers_.resize(static_cast<size_t>(c_.n_layer));
    for (int64_t l = 0; l < c_.n_layer; ++l) {
      for (int t = 0; t < kNumLayerTensors; ++t) {
        const Weight& w = m.Get(LayerName(l, static_cast<LayerTensor>(t)));
        if (!w.present()) continue;  // biases and q/k norms are optional
        const bool vector =
            t == kAttnNorm || t == kFfnNorm || t == kBq || t == kBk || t == kBv || t == kQNorm || t == kKNorm;
        auto b = vector ? be_.BindVector(w) : be_.BindMatrix(w);
        if (!b.ok()) return b.status().WithContext(LayerName(l, static_cast<LayerTensor>(t)));
        layers_[static_cast<size_t>(l)].w[t] = *b;
      }
    }
    RopeSpec rope{m.rope_inv_freq, m.rope_neox, static_cast<float>(m.rope_attn_factor)};
    FAK_ASSIGN_OR_RETURN(rope_, be_.BindRope(rope));
    return Status::Ok();
  }

  Status Reserve(int64_t max_rows, int64_t max_out) override {
    if (max_rows > rows_) {
      const int64_t n = max_rows, q = c_.n_head * c_.head_dim, kv = c_.n_kv_head * c_.head_dim;
      FAK_RETURN_IF_ERROR(Realloc(x_, n, c_.d_model));
      FAK_RETURN_IF_ERROR(Realloc(xn_, n, c_.d_model));
      FAK_RETURN_IF_ERROR(Realloc(q_, n, q));
      FAK_RETURN_IF_ERROR(Realloc(k_, n, kv));
      FAK_RETURN_IF_ERROR(Realloc(v_, n, kv));
      FAK_RETURN_IF_ERROR(Realloc(attn_, n, q));
      FAK_RETURN_IF_ERROR(Realloc(o_, n, c_.d_model));
      FAK_RETURN_IF_ERROR(Realloc(gate_, n, c_.d_ffn));
      FAK_RETURN_IF_ERROR(Realloc(up_, n, c_.d_ffn));
      rows_ = max_rows;
    }
    if (max_out > outs_) {
      FAK_RETURN_IF_ERROR(Realloc(out_x_, max_out, c_.d_model));
      FAK_RETURN_IF_ERROR(Realloc(out_xn_, max_out, c_.d_model));
      outs_ = max_out;
    }
    return Status::Ok();
  }

  void Forward(const BatchPlan& b, int32_t kv, int32_t /*states*/, Tensor logits) override {
    const int64_t n = static_cast<int64_t>(b.tokens.size()), n_out = static_cast<int64_t>(b.out_rows.size());
    const int64_t hd = c_.head_dim;
    const float eps = static_cast<float>(c_.norm_eps), scale = 1.0f / std::sqrt(static_cast<float>(hd));
    // Views of this batch's rows.
    const Tensor x = x_.Rows(0, n), xn = xn_.Rows(0, n), q = q_.Rows(0, n), k = k_.Rows(0, n),
                 v = v_.Rows(0, n);
    const Tensor attn = attn_.Rows(0, n), o = o_.Rows(0, n), gate = gate_.Rows(0, n), up = up_.Rows(0, n);
    be_.Embed(embd_, x);
    Probe("embedding", -1, x);
    for (int64_t l = 0; l < c_.n_layer; ++l) {
      const BoundWeight* w = layers_[static_cast<size_t>(l)].w;
      // Attention block.
      be_.RmsNorm(x, w[kAttnNorm], xn, eps);
      const BoundWeight qkv_w[] = {w[kWq], w[kWk], w[kWv]};
      const Tensor qkv_y[] = {q, k, v};
      be_.MatMuls(xn, qkv_w, qkv_y);
      if (w[kBq].present()) be_.AddRow(q, w[kBq]);
      if (w[kBk].present()) be_.AddRow(k, w[kBk]);
      if (w[kBv].present()) be_.AddRow(v, w[kBv]);
      if (w[kQNorm].present()) be_.RmsNorm(q.Reshaped(hd), w[kQNorm], q.Reshaped(hd), eps);
      if (w[kKNorm].present()) be_.RmsNorm(k.Reshaped(hd), w[kKNorm], k.Reshaped(hd), eps);
      be_.Rope(q, hd, rope_);
      be_.Rope(k, hd, rope_);
      be_.KvWrite(kv, l, k, v);
      be_.Attention(kv, l, q, scale, attn);
      be_.MatMul(w[kWo], attn, o);
      be_.Add(x, o);
      Probe("attention", l, x);
      // FFN block.
      be_.RmsNorm(x, w[kFfnNorm], xn, eps);
      be_.MatMulSwiGLU(w[kGate], w[kUp], xn, gate, up);
      be_.MatMul(w[kDown], gate, o);
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
  Status Realloc(Tensor& t, int64_t rows, int64_t cols) { return ReallocActivation(be_, t, rows, cols); }

  const ModelConfig& c_;
  Backend& be_;
  BoundWeight embd_, out_norm_, out_;
  std::vector<Layer> layers_;
  int32_t rope_ = -1;
  int64_t rows_ = 0, outs_ = 0;
  // Activations: (rows, d_model) x, xn, o; (rows, n_head*hd) q, attn; (rows, n_kv*hd) k, v;
  // (rows, d_ffn) gate, up; (outs, d_model) out_x, out_xn.
  Tensor x_, xn_, q_, k_, v_, attn_, o_, gate_, up_, out_x_, out_xn_;
};

Result<std::unique_ptr<ArchInstance>> InstantiateLlama(const Model& m, Backend& be) {
  auto a = std::make_unique<Llama>(m.config, be);
  FAK_RETURN_IF_ERROR(a->Bind(m));
  return std::unique_ptr<ArchInstance>(std::move(a));
}

}  // namespace

const Architecture& LlamaFamily() {
  static const Architecture arch{
      "llama-family",
      {"llama", "qwen2", "qwen3"},
      {{"model.embed_tokens.weight", kEmbd}, {"model.norm.weight", kOutNorm}, {"lm_head.weight", kOut}},
      HfToGgufNames(kLayerNames),
      {},
      &LlamaTensors,
      &LlamaCaches,
      &LlamaConfigure,
      nullptr,
      &InstantiateLlama,
  };
  return arch;
}

}  // namespace fak
