// The CUDA backend's ops of the hybrid architecture's Gated-DeltaNet layers and their recurrent state
// slots.
#include <cstring>

#include "backends/cuda/backend_impl.h"

namespace fak::cuda {

Result<int32_t> CudaBackend::BindDeltaNet(const DeltaNetSpec& d) {
  if (d.n_k_head <= 0 || d.n_v_head <= 0 || d.k_dim <= 0 || d.v_dim <= 0 || d.n_v_head % d.n_k_head != 0) {
    return InvalidArgument("Gated-DeltaNet geometry: {} key and {} value heads of {} and {}", d.n_k_head,
                           d.n_v_head, d.k_dim, d.v_dim);
  }
  if (d.conv_kernel < 1 || d.conv_kernel > 16 || d.k_dim > 128 || d.k_dim % 4 != 0 || d.conv_dim() % 4 != 0) {
    return Unsupported(
        "CUDA: Gated-DeltaNet convolution width {}, key heads of {} or {} channels (fak runs widths to 16, "
        "key heads to 128 and multiples of 4 in both)",
        d.conv_kernel, d.k_dim, d.conv_dim());
  }
  delta_nets_.push_back(d);
  return static_cast<int32_t>(delta_nets_.size() - 1);
}

// The gate and the gated norm write their output's shadow with it (its reader is a quantized product)
// where the shadow's groups can be made in their launch, so that product needs no quantize launch.
void CudaBackend::SigmoidMul(Tensor x, Tensor g) {
  if (!error_.ok()) return;
  FlushRopes();
  Q8Act sh;
  const bool shadow = x.cols % 32 == 0 && ShadowSlot(x, &sh);
  int8_t* q = shadow ? const_cast<int8_t*>(sh.q) : nullptr;
  float* d = shadow ? const_cast<float*>(sh.d) : nullptr;
  const int group = shadow_group_;
  float* xs = x.data;
  const float* gs = g.data;
  const int64_t rows = x.rows, cols = x.cols;
  Queue("SigmoidMul", {U(xs), U(gs), U(rows), U(cols), U(q), U(d), U(group)},
        [=](cudaStream_t s) { return fak::cuda::SigmoidMul(xs, gs, rows, cols, q, d, group, s); });
  shadow ? Shadowed(x) : Written(x);
}

void CudaBackend::SplitHeads(Tensor x, int64_t head_dim, Tensor a, Tensor b) {
  if (!error_.ok()) return;
  FlushRopes();
  const float* xs = x.data;
  float* as = a.data;
  float* bs = b.data;
  const int64_t heads = x.rows * x.cols / (2 * head_dim);
  Queue("SplitHeads", {U(xs), U(heads), U(head_dim), U(as), U(bs)},
        [=](cudaStream_t s) { return fak::cuda::SplitHeads(xs, heads, head_dim, as, bs, s); });
  Written(a);
  Written(b);
}

void CudaBackend::GatedRmsNorm(Tensor x, BoundWeight w, Tensor z, float eps) {
  if (!error_.ok()) return;
  FlushRopes();
  float* xs = x.data;
  const float* wv = vectors_[static_cast<size_t>(w.id)];
  const float* zs = z.data;
  const int64_t rows = x.rows, cols = x.cols;
  // x is the heads' view (a row per head) of the product's input: the shadow in blocks of 32, or in
  // groups of 256 over the whole view where heads tile a group (kernels.h).
  const int group = shadow_group_;
  Q8Act sh;
  const bool shadow =
      cols % 32 == 0 && ShadowSlot(x, &sh) && (group == 32 || GatedNormShadowGroups(rows, cols));
  int8_t* q = shadow ? const_cast<int8_t*>(sh.q) : nullptr;
  float* d = shadow ? const_cast<float*>(sh.d) : nullptr;
  uint32_t eps_bits;
  std::memcpy(&eps_bits, &eps, 4);
  Queue("GatedRmsNorm", {U(xs), U(wv), U(zs), U(rows), U(cols), eps_bits, U(q), U(d), U(group)},
        [=](cudaStream_t s) { return fak::cuda::GatedRmsNorm(xs, wv, zs, rows, cols, eps, q, d, group, s); });
  shadow ? Shadowed(x, group) : Written(x);  // consecutive groups: any reader whose rows are whole groups
}

void CudaBackend::DeltaNetConv(int32_t states, int32_t dn, Tensor x, BoundWeight conv) {
  if (!error_.ok()) return;
  FlushRopes();
  const DeltaNetDevice d = DeviceDeltaNet(states, dn);
  float* xs = x.data;
  const float* w = vectors_[static_cast<size_t>(conv.id)];
  const int32_t* seqs = seqs_dev_;
  const int64_t n_seqs = n_seqs_, rows = x.rows;
  Queue("DeltaNetConv", {U(xs), U(w), U(d.states), U(d.conv_offset), U(seqs), U(n_seqs), U(rows)},
        [=](cudaStream_t s) { return fak::cuda::DeltaNetConv(xs, w, d, seqs, n_seqs, rows, s); });
  Written(x);
}

void CudaBackend::DeltaNetRule(int32_t states, int32_t dn, Tensor x, Tensor b, Tensor a, BoundWeight ssm_a,
                               BoundWeight dt_bias, Tensor out) {
  if (!error_.ok()) return;
  FlushRopes();
  const DeltaNetDevice d = DeviceDeltaNet(states, dn);
  const float* xs = x.data;
  const float* bs = b.data;
  const float* as = a.data;
  const float* av = vectors_[static_cast<size_t>(ssm_a.id)];
  const float* dtv = vectors_[static_cast<size_t>(dt_bias.id)];
  float* os = out.data;
  const int32_t* seqs = seqs_dev_;
  const int64_t n_seqs = n_seqs_;
  Queue("DeltaNetRule",
        {U(xs), U(bs), U(as), U(av), U(dtv), U(d.states), U(d.rule_offset), U(seqs), U(n_seqs), U(os)},
        [=](cudaStream_t s) { return fak::cuda::DeltaNetRule(xs, bs, as, av, dtv, d, seqs, n_seqs, os, s); });
  Written(out);
}

Result<int32_t> CudaBackend::CreateStates(size_t slot_bytes, int64_t n_slots) {
  if (slot_bytes == 0 || n_slots <= 0) return InvalidArgument("state store with no slots");
  States s{slot_bytes, n_slots, nullptr};
  FAK_ASSIGN_OR_RETURN(void* p,
                       DeviceAlloc(slot_bytes * static_cast<size_t>(n_slots), "recurrent state slots"));
  s.data = static_cast<uint8_t*>(p);
  FAK_RETURN_IF_ERROR(
      CudaStatus(cudaMemset(p, 0, slot_bytes * static_cast<size_t>(n_slots)), "zeroing states"));
  states_.push_back(s);
  return static_cast<int32_t>(states_.size() - 1);
}

void CudaBackend::CopyState(int32_t states, int64_t src, int64_t dst) {
  if (!error_.ok()) return;
  FlushRopes();
  const States& st = states_[static_cast<size_t>(states)];
  uint8_t* d = st.data + static_cast<size_t>(dst) * st.slot_bytes;
  const uint8_t* sp = st.data + static_cast<size_t>(src) * st.slot_bytes;
  const size_t bytes = st.slot_bytes;
  Queue("CopyState", {U(d), U(sp), bytes},
        [=](cudaStream_t s) { return cudaMemcpyAsync(d, sp, bytes, cudaMemcpyDeviceToDevice, s); });
}

void CudaBackend::ClearState(int32_t states, int64_t slot) {
  if (!error_.ok()) return;
  FlushRopes();
  const States& st = states_[static_cast<size_t>(states)];
  uint8_t* d = st.data + static_cast<size_t>(slot) * st.slot_bytes;
  const size_t bytes = st.slot_bytes;
  Queue("ClearState", {U(d), bytes}, [=](cudaStream_t s) { return cudaMemsetAsync(d, 0, bytes, s); });
}

DeltaNetDevice CudaBackend::DeviceDeltaNet(int32_t states, int32_t dn) const {
  const DeltaNetSpec& spec = delta_nets_[static_cast<size_t>(dn)];
  const States& st = states_[static_cast<size_t>(states)];
  DeltaNetDevice d;
  d.states = st.data;
  d.slot_bytes = st.slot_bytes;
  d.conv_offset = spec.state_offset;
  d.rule_offset = spec.state_offset + spec.ConvStateBytes();
  d.n_k_head = spec.n_k_head;
  d.n_v_head = spec.n_v_head;
  d.k_dim = spec.k_dim;
  d.v_dim = spec.v_dim;
  d.conv_dim = spec.conv_dim();
  d.conv_kernel = static_cast<int>(spec.conv_kernel);
  d.eps = spec.eps;
  d.key_group = spec.grouped ? spec.n_v_head / spec.n_k_head : 0;
  return d;
}

}  // namespace fak::cuda
