// The Llama family: Llama 2/3 (GQA, RoPE with llama3/linear/YaRN scaling, SwiGLU, RMSNorm, tied or
// untied output), Qwen2 (q/k/v biases) and Qwen3 (per-head q/k RMSNorm). One forward pass covers all
// of them; which pieces run is decided by the tensors the model has.
#include <cmath>
#include <cstring>

#include "engine/arch/arch.h"
#include "ops/attention.h"
#include "ops/cpu_ops.h"

namespace fak {
namespace {

Status BindLlama(Model& m, WeightLoader& ld) {
  const ModelConfig& c = m.config;
  const int64_t d = c.d_model, hd = c.head_dim, q_dim = c.n_head * hd, kv_dim = c.n_kv_head * hd;
  FAK_ASSIGN_OR_RETURN(m.output_norm, ld.Vector("output_norm.weight", d, "d_model"));
  if (ld.Has("output.weight")) {
    FAK_ASSIGN_OR_RETURN(m.token_embd, ld.Matrix("token_embd.weight", c.vocab_size, d, "vocab x d_model", true));
    m.embd_as = m.token_embd.type;
    m.lookup_only_bytes = static_cast<uint64_t>(m.token_embd.rows) * m.token_embd.row_bytes;
    FAK_ASSIGN_OR_RETURN(m.output, ld.Matrix("output.weight", c.vocab_size, d, "vocab x d_model"));
  } else {
    FAK_ASSIGN_OR_RETURN(auto tied, ld.TiedEmbedding("token_embd.weight", c.vocab_size, d, "vocab x d_model"));
    m.token_embd = tied.lookup;
    m.embd_as = tied.lookup_as;
    m.output = tied.output;
    m.lookup_only_bytes = 0;
  }
  m.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& L = m.layers[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    FAK_ASSIGN_OR_RETURN(L.attn_norm, ld.Vector(p + "attn_norm.weight", d, "d_model"));
    FAK_ASSIGN_OR_RETURN(L.wq, ld.Matrix(p + "attn_q.weight", q_dim, d, "n_head*head_dim x d_model"));
    FAK_ASSIGN_OR_RETURN(L.wk, ld.Matrix(p + "attn_k.weight", kv_dim, d, "n_kv_head*head_dim x d_model"));
    FAK_ASSIGN_OR_RETURN(L.wv, ld.Matrix(p + "attn_v.weight", kv_dim, d, "n_kv_head*head_dim x d_model"));
    FAK_ASSIGN_OR_RETURN(L.wo, ld.Matrix(p + "attn_output.weight", d, q_dim, "d_model x n_head*head_dim"));
    FAK_ASSIGN_OR_RETURN(L.bq, ld.OptionalVector(p + "attn_q.bias", q_dim, "n_head*head_dim"));
    FAK_ASSIGN_OR_RETURN(L.bk, ld.OptionalVector(p + "attn_k.bias", kv_dim, "n_kv_head*head_dim"));
    FAK_ASSIGN_OR_RETURN(L.bv, ld.OptionalVector(p + "attn_v.bias", kv_dim, "n_kv_head*head_dim"));
    if (c.qk_norm) {
      FAK_ASSIGN_OR_RETURN(L.q_norm, ld.Vector(p + "attn_q_norm.weight", hd, "head_dim"));
      FAK_ASSIGN_OR_RETURN(L.k_norm, ld.Vector(p + "attn_k_norm.weight", hd, "head_dim"));
    }
    FAK_ASSIGN_OR_RETURN(L.ffn_norm, ld.Vector(p + "ffn_norm.weight", d, "d_model"));
    FAK_ASSIGN_OR_RETURN(L.w_gate, ld.Matrix(p + "ffn_gate.weight", c.d_ffn, d, "d_ffn x d_model"));
    FAK_ASSIGN_OR_RETURN(L.w_up, ld.Matrix(p + "ffn_up.weight", c.d_ffn, d, "d_ffn x d_model"));
    FAK_ASSIGN_OR_RETURN(L.w_down, ld.Matrix(p + "ffn_down.weight", d, c.d_ffn, "d_model x d_ffn"));
  }
  if (c.qkv_bias && !m.layers.empty() && !m.layers[0].bq.present()) {
    return NotFound("missing tensor 'blk.0.attn_q.bias' (the config declares q/k/v biases)");
  }
  return Status::Ok();
}

void Grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

Status ForwardLlama(const Model& m, KvSequence& kv, const ForwardRequest& req, ForwardScratch& s,
                    cpu::ThreadPool& pool) {
  const ModelConfig& c = m.config;
  const int64_t T = static_cast<int64_t>(req.tokens.size());
  if (T == 0) return InvalidArgument("forward pass with no tokens");
  const int64_t d = c.d_model, hd = c.head_dim, nh = c.n_head, nkv = c.n_kv_head;
  const int64_t q_dim = nh * hd, kv_dim = nkv * hd, group = nh / nkv;
  const int64_t pos0 = kv.size();
  const int64_t rot_dim = static_cast<int64_t>(m.rope_inv_freq.size()) * 2;
  const float eps = static_cast<float>(c.norm_eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float rope_factor = static_cast<float>(m.rope_attn_factor);
  FAK_RETURN_IF_ERROR(kv.Reserve(pos0 + T));

  Grow(s.x, T * d);
  Grow(s.xn, T * d);
  Grow(s.q, T * q_dim);
  Grow(s.k, T * kv_dim);
  Grow(s.v, T * kv_dim);
  Grow(s.attn, T * q_dim);
  Grow(s.o, T * d);
  Grow(s.gate, T * c.d_ffn);
  Grow(s.up, T * c.d_ffn);
  Grow(s.scores, static_cast<size_t>(pool.size()) * static_cast<size_t>(pos0 + T));

  for (int64_t t = 0; t < T; ++t) FAK_RETURN_IF_ERROR(ops::EmbeddingRow(m.token_embd, req.tokens[t], &s.x[t * d], m.embd_as));

  const ops::AttendHeadFn attend = ops::AttendHead();
  KvPagePool& kvp = kv.pool();
  const bool kv_f32 = kvp.geometry().f32;
  const size_t n_pages = kv.pages().size();
  std::vector<const uint16_t*> kp(static_cast<size_t>(nkv) * n_pages), vp(kp.size());

  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = m.layers[static_cast<size_t>(l)];
    ops::RmsNorm(s.x.data(), L.attn_norm.f32(), s.xn.data(), T, d, eps);
    FAK_RETURN_IF_ERROR(ops::MatMul(L.wq, s.xn.data(), T, s.q.data(), pool));
    FAK_RETURN_IF_ERROR(ops::MatMul(L.wk, s.xn.data(), T, s.k.data(), pool));
    FAK_RETURN_IF_ERROR(ops::MatMul(L.wv, s.xn.data(), T, s.v.data(), pool));
    if (L.bq.present()) ops::AddBias(s.q.data(), L.bq.f32(), T, q_dim);
    if (L.bk.present()) ops::AddBias(s.k.data(), L.bk.f32(), T, kv_dim);
    if (L.bv.present()) ops::AddBias(s.v.data(), L.bv.f32(), T, kv_dim);
    if (L.q_norm.present()) ops::RmsNorm(s.q.data(), L.q_norm.f32(), s.q.data(), T * nh, hd, eps);
    if (L.k_norm.present()) ops::RmsNorm(s.k.data(), L.k_norm.f32(), s.k.data(), T * nkv, hd, eps);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = pos0 + t;
      ops::Rope(&s.q[t * q_dim], nh, hd, rot_dim, pos, m.rope_inv_freq.data(), m.rope_neox, rope_factor);
      ops::Rope(&s.k[t * kv_dim], nkv, hd, rot_dim, pos, m.rope_inv_freq.data(), m.rope_neox, rope_factor);
      for (int64_t h = 0; h < nkv; ++h) {
        const float* ks = &s.k[t * kv_dim + h * hd];
        const float* vs = &s.v[t * kv_dim + h * hd];
        if (kv_f32) {
          std::memcpy(kv.Key(pos, l, h), ks, static_cast<size_t>(hd) * 4);
          std::memcpy(kv.Value(pos, l, h), vs, static_cast<size_t>(hd) * 4);
          continue;
        }
        uint16_t* kd = kv.Key(pos, l, h);
        uint16_t* vd = kv.Value(pos, l, h);
        for (int64_t i = 0; i < hd; ++i) {
          kd[i] = ops::FloatToHalf(ks[i]);
          vd[i] = ops::FloatToHalf(vs[i]);
        }
      }
    }
    for (int64_t h = 0; h < nkv; ++h) {
      for (size_t p = 0; p < n_pages; ++p) {
        kp[h * n_pages + p] = kvp.Keys(kv.pages()[p], l, h);
        vp[h * n_pages + p] = kvp.Values(kv.pages()[p], l, h);
      }
    }
    // One (token, head) pair per work item; every pair reads only the cache, so chunking the prompt
    // differently gives the same result.
    const int64_t page_tokens = kvp.geometry().page_tokens;
    const int64_t stride = pos0 + T;
    pool.Run([&](int tid, int nt) {
      float* scores = &s.scores[static_cast<size_t>(tid) * static_cast<size_t>(stride)];
      for (int64_t item = tid; item < T * nh; item += nt) {
        const int64_t t = item / nh, h = item % nh, g = h / group;
        ops::HeadKv hk{&kp[g * n_pages], &vp[g * n_pages], page_tokens, kv_f32};
        attend(&s.q[t * q_dim + h * hd], hd, hk, pos0 + t + 1, scale, scores, &s.attn[t * q_dim + h * hd]);
      }
    });
    FAK_RETURN_IF_ERROR(ops::MatMul(L.wo, s.attn.data(), T, s.o.data(), pool));
    for (int64_t i = 0; i < T * d; ++i) s.x[i] += s.o[i];

    ops::RmsNorm(s.x.data(), L.ffn_norm.f32(), s.xn.data(), T, d, eps);
    FAK_RETURN_IF_ERROR(ops::MatMul(L.w_gate, s.xn.data(), T, s.gate.data(), pool));
    FAK_RETURN_IF_ERROR(ops::MatMul(L.w_up, s.xn.data(), T, s.up.data(), pool));
    ops::SiluMul(s.gate.data(), s.up.data(), T * c.d_ffn);
    FAK_RETURN_IF_ERROR(ops::MatMul(L.w_down, s.gate.data(), T, s.o.data(), pool));
    for (int64_t i = 0; i < T * d; ++i) s.x[i] += s.o[i];
  }
  kv.Commit(pos0 + T);

  const int64_t n_out = req.all_logits ? T : 1;
  const float* last = &s.x[(T - n_out) * d];
  ops::RmsNorm(last, m.output_norm.f32(), s.xn.data(), n_out, d, eps);
  return ops::MatMul(m.output, s.xn.data(), n_out, req.logits, pool);
}

}  // namespace

const Architecture& LlamaFamily() {
  static const Architecture arch{"llama-family", {"llama", "qwen2", "qwen3"}, &BindLlama, &ForwardLlama};
  return arch;
}

}  // namespace fak
