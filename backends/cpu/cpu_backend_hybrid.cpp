// The CPU backend's ops of the hybrid architectures (cpu_backend_impl.h): the Gated-DeltaNet layer's
// gates, convolution and recurrence over per-sequence state slots, and the mixture-of-experts FFN.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>

#include "backends/cpu/cpu_backend_impl.h"
#include "backends/cpu/delta_net.h"  // DeltaNetConvChannels, DeltaNetHead, GatedRmsNorm
#include "backends/cpu/moe.h"        // RouteRow, GroupByExpert, CombineRow

namespace fak::cpu::detail {

Result<int32_t> CpuBackend::BindDeltaNet(const DeltaNetSpec& d) {
  if (d.n_k_head <= 0 || d.n_v_head <= 0 || d.k_dim <= 0 || d.v_dim <= 0 || d.n_v_head % d.n_k_head != 0) {
    return InvalidArgument("Gated-DeltaNet geometry: {} key and {} value heads of {} and {}", d.n_k_head,
                           d.n_v_head, d.k_dim, d.v_dim);
  }
  if (d.conv_kernel < 1 || d.conv_kernel > 16) {
    return Unsupported("Gated-DeltaNet convolution of width {} (fak runs 1 to 16)", d.conv_kernel);
  }
  delta_nets_.push_back(d);
  return static_cast<int32_t>(delta_nets_.size() - 1);
}

Result<int32_t> CpuBackend::BindMoe(const MoeSpec& m) {
  if (m.n_expert <= 0 || m.n_used <= 0 || m.n_used > m.n_expert) {
    return InvalidArgument("mixture of experts: {} of {} experts per token", m.n_used, m.n_expert);
  }
  const auto n = static_cast<size_t>(m.n_expert);
  if (m.gate.size() != n || m.up.size() != n || m.down.size() != n) {
    return InvalidArgument("mixture of experts: {} experts but {}/{}/{} gate/up/down matrices", n,
                           m.gate.size(), m.up.size(), m.down.size());
  }
  if (!m.router.present() || m.router.rows != m.n_expert) {
    return InvalidArgument("mixture of experts: the router has {} rows for {} experts", m.router.rows, n);
  }
  const int64_t d = m.router.cols;
  auto ffn_ok = [d](BoundWeight g, BoundWeight u, BoundWeight w) {
    return g.present() && u.present() && w.present() && g.cols == d && u.rows == g.rows && u.cols == d &&
           w.rows == d && w.cols == g.rows;
  };
  for (size_t e = 0; e < n; ++e) {
    if (!ffn_ok(m.gate[e], m.up[e], m.down[e])) {
      return InvalidArgument("mixture of experts: expert {}'s matrices do not fit a model width of {}", e, d);
    }
  }
  const bool shared = m.shared_gate.present() || m.shared_up.present() || m.shared_down.present();
  if (shared && !ffn_ok(m.shared_gate, m.shared_up, m.shared_down)) {
    return InvalidArgument("mixture of experts: the shared expert's matrices do not fit a model width of {}",
                           d);
  }
  if (m.shared_scale.present() && (!shared || m.shared_scale.cols != d)) {
    return InvalidArgument("mixture of experts: a shared-expert gate of {} values for a width of {}",
                           m.shared_scale.cols, d);
  }
  moes_.push_back(m);
  return static_cast<int32_t>(moes_.size() - 1);
}

Result<int32_t> CpuBackend::CreateStates(size_t slot_bytes, int64_t n_slots) {
  if (slot_bytes == 0 || n_slots <= 0) return InvalidArgument("state store with no slots");
  StateStore s;
  s.slot_bytes = slot_bytes;
  const size_t total = slot_bytes * static_cast<size_t>(n_slots);
  if (total / static_cast<size_t>(n_slots) != slot_bytes || total > (size_t{1} << 40)) {
    return OutOfRange("{} recurrent-state slots of {} bytes do not fit in memory", n_slots, slot_bytes);
  }
  try {
    s.data.assign(total, 0);
  } catch (const std::bad_alloc&) {
    return OutOfRange("cannot allocate {} recurrent-state slots of {:.1f} MiB", n_slots,
                      static_cast<double>(slot_bytes) / 1048576.0);
  }
  states_.push_back(std::move(s));
  return static_cast<int32_t>(states_.size() - 1);
}

void CpuBackend::SigmoidMul(Tensor x, Tensor g) {
  if (!error_.ok()) return;
  Profile prof(this, kGates);
  Elements(x.rows * x.cols, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x.data[i] *= 1.0f / (1.0f + std::exp(-g.data[i]));
  });
}

void CpuBackend::SplitHeads(Tensor x, int64_t head_dim, Tensor a, Tensor b) {
  if (!error_.ok()) return;
  Profile prof(this, kGates);
  const int64_t heads = x.rows * x.cols / (2 * head_dim);
  const size_t bytes = static_cast<size_t>(head_dim) * 4;
  for (int64_t h = 0; h < heads; ++h) {
    std::memcpy(a.data + h * head_dim, x.data + 2 * h * head_dim, bytes);
    std::memcpy(b.data + h * head_dim, x.data + (2 * h + 1) * head_dim, bytes);
  }
}

void CpuBackend::GatedRmsNorm(Tensor x, BoundWeight w, Tensor z, float eps) {
  if (!error_.ok()) return;
  Profile prof(this, kGates);
  const float* wv = vectors_[static_cast<size_t>(w.id)];
  Rows(x.rows, x.cols, [&](int64_t r0, int64_t r1) {
    cpu::GatedRmsNorm(x.data + r0 * x.cols, wv, z.data + r0 * z.cols, x.data + r0 * x.cols, r1 - r0, x.cols,
                      eps);
  });
}

void CpuBackend::DeltaNetConv(int32_t states, int32_t dn, Tensor x, BoundWeight conv) {
  if (!error_.ok()) return;
  Profile prof(this, kDeltaNetConv);
  const DeltaNetSpec& d = delta_nets_[static_cast<size_t>(dn)];
  const float* w = vectors_[static_cast<size_t>(conv.id)];
  const int64_t cd = d.conv_dim();
  for (const SeqRows& sr : seq_rows_) {
    float* window = StateOf(states, sr.seq, d.state_offset);
    float* xs = x.data + sr.row0 * cd;
    if (sr.n * cd < kMinParallelElements || pool_.size() == 1) {
      DeltaNetConvChannels(d, xs, sr.n, w, window, 0, cd);
      continue;
    }
    pool_.ParallelForDynamic(
        cd, 64, [&](int64_t c0, int64_t c1) { DeltaNetConvChannels(d, xs, sr.n, w, window, c0, c1); });
  }
}

void CpuBackend::DeltaNetRule(int32_t states, int32_t dn, Tensor x, Tensor b, Tensor a, BoundWeight ssm_a,
                              BoundWeight dt_bias, Tensor out) {
  if (!error_.ok()) return;
  Profile prof(this, kDeltaNetRule);
  const DeltaNetSpec& d = delta_nets_[static_cast<size_t>(dn)];
  const float* av = vectors_[static_cast<size_t>(ssm_a.id)];
  const float* dtv = vectors_[static_cast<size_t>(dt_bias.id)];
  const int64_t nv = d.n_v_head, cd = d.conv_dim(), head_floats = d.k_dim * d.v_dim;
  const int64_t n_items = static_cast<int64_t>(seq_rows_.size()) * nv;
  const int64_t scratch = 2 * (d.k_dim + d.v_dim);
  if (rule_scratch_.size() < static_cast<size_t>(pool_.size() * scratch)) {
    rule_scratch_.resize(static_cast<size_t>(pool_.size() * scratch));
  }
  // Work items: (sequence, value head); each runs its rows in order on one thread.
  auto item = [&](int64_t i, float* sc) {
    const SeqRows& sr = seq_rows_[static_cast<size_t>(i / nv)];
    const int64_t h = i % nv;
    float* s = StateOf(states, sr.seq, d.state_offset + d.ConvStateBytes()) + h * head_floats;
    DeltaNetHead(d, h, x.data + sr.row0 * cd, b.data + sr.row0 * b.cols, a.data + sr.row0 * a.cols, sr.n,
                 av[h], dtv[h], s, out.data + sr.row0 * out.cols, sc);
  };
  if (pool_.size() == 1 || n_items == 1) {
    for (int64_t i = 0; i < n_items; ++i) item(i, rule_scratch_.data());
    return;
  }
  pool_.Run([&](int tid, int nt) {
    for (int64_t i = tid; i < n_items; i += nt) item(i, &rule_scratch_[static_cast<size_t>(tid * scratch)]);
  });
}

void CpuBackend::MoeFfn(int32_t id, Tensor x, Tensor out) {
  if (!error_.ok()) return;
  const MoeSpec& m = moes_[static_cast<size_t>(id)];
  const int64_t n = x.rows, d = x.cols, n_exp = m.n_expert, k = m.n_used;
  const int64_t widest = std::max(m.gate[0].rows, m.shared_gate.present() ? m.shared_gate.rows : 0);
  float* logits = moe_logits_.Get(n * n_exp);
  float* y = moe_y_.Get(n * k * d);  // (row, rank) results
  float* xe = moe_x_.Get(n * d);
  float* ge = moe_g_.Get(n * widest);
  float* ue = moe_u_.Get(n * widest);
  float* ye = moe_out_.Get(n * d);
  float* shared = m.shared_gate.present() ? moe_shared_.Get(n * d) : nullptr;
  if (!logits || !y || !xe || !ge || !ue || !ye || (m.shared_gate.present() && !shared)) {
    return Fail(OutOfRange("mixture of experts: no memory for the scratch of {} rows", n));
  }
  MatMul(m.router, x, Tensor{logits, n, n_exp});
  if (!error_.ok()) return;
  moe_ids_.resize(static_cast<size_t>(n * k));
  moe_weights_.resize(static_cast<size_t>(n * k));
  {
    Profile prof(this, kMoe);
    for (int64_t r = 0; r < n; ++r) {
      RouteRow(logits + r * n_exp, n_exp, k, m.norm_top_k, &moe_ids_[static_cast<size_t>(r * k)],
               &moe_weights_[static_cast<size_t>(r * k)]);
    }
  }
  GroupByExpert(moe_ids_, n_exp, &moe_first_, &moe_slots_);
  for (int64_t e = 0; e < n_exp; ++e) {
    const int64_t first = moe_first_[static_cast<size_t>(e)];
    const int64_t rows = moe_first_[static_cast<size_t>(e) + 1] - first;
    if (rows == 0) continue;
    const int64_t* slots = &moe_slots_[static_cast<size_t>(first)];
    const int64_t ff = m.gate[static_cast<size_t>(e)].rows;
    for (int64_t i = 0; i < rows; ++i) {
      std::memcpy(xe + i * d, x.data + slots[i] / k * x.cols, static_cast<size_t>(d) * 4);
    }
    const Tensor g{ge, rows, ff};
    MatMulSwiGLU(m.gate[static_cast<size_t>(e)], m.up[static_cast<size_t>(e)], Tensor{xe, rows, d}, g,
                 Tensor{ue, rows, ff});
    MatMul(m.down[static_cast<size_t>(e)], g, Tensor{ye, rows, d});
    for (int64_t i = 0; i < rows; ++i) {
      std::memcpy(y + slots[i] * d, ye + i * d, static_cast<size_t>(d) * 4);
    }
  }
  if (shared != nullptr) {
    const int64_t ff = m.shared_gate.rows;
    const Tensor g{ge, n, ff};
    MatMulSwiGLU(m.shared_gate, m.shared_up, x, g, Tensor{ue, n, ff});
    MatMul(m.shared_down, g, Tensor{shared, n, d});
  }
  if (!error_.ok()) return;
  Profile prof(this, kMoe);
  const float* scale_w =
      m.shared_scale.present() ? vectors_[static_cast<size_t>(m.shared_scale.id)] : nullptr;
  Rows(n, d, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float scale = shared == nullptr    ? 0.0f
                          : scale_w == nullptr ? 1.0f
                                               : SharedExpertGate(x.data + r * x.cols, scale_w, d);
      CombineRow(y + r * k * d, &moe_weights_[static_cast<size_t>(r * k)], k, d,
                 shared == nullptr ? nullptr : shared + r * d, scale, out.data + r * out.cols);
    }
  });
}

void CpuBackend::CopyState(int32_t states, int64_t src, int64_t dst) {
  if (!error_.ok()) return;
  StateStore& s = states_[static_cast<size_t>(states)];
  std::memcpy(s.data.data() + static_cast<size_t>(dst) * s.slot_bytes,
              s.data.data() + static_cast<size_t>(src) * s.slot_bytes, s.slot_bytes);
}

}  // namespace fak::cpu::detail
