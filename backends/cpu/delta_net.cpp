#include "backends/cpu/delta_net.h"

#include <cmath>
#include <cstring>

namespace fak::cpu {
namespace {

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

// log(1 + e^x), linear above 20 as torch's softplus is.
float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x *= 1 / sqrt(sum(x^2) + eps), summed in order.
void L2Normalize(float* x, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss + eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

// The update loops run across a head's v_dim lanes with one multiply and one add per element in a
// fixed order (no contraction: fak_cpu builds with -ffp-contract=off), so the wider clones give the
// scalar build's bits.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define FAK_DELTA_NET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FAK_DELTA_NET_CLONES
#endif

void DeltaNetConvChannels(const DeltaNetSpec& s, float* x, int64_t n, const float* w, float* window,
                          int64_t c0, int64_t c1) {
  const int64_t cd = s.conv_dim(), hist = s.conv_kernel - 1;
  constexpr int64_t kMaxKernel = 16;  // checked when the layer is bound
  for (int64_t c = c0; c < c1; ++c) {
    float win[kMaxKernel];
    for (int64_t j = 0; j < hist; ++j) win[j] = window[j * cd + c];
    const float* wc = w + c * s.conv_kernel;
    for (int64_t t = 0; t < n; ++t) {
      const float in = x[t * cd + c];
      float acc = 0.0f;
      for (int64_t j = 0; j < hist; ++j) acc += wc[j] * win[j];
      acc += wc[hist] * in;
      for (int64_t j = 0; j + 1 < hist; ++j) win[j] = win[j + 1];
      if (hist > 0) win[hist - 1] = in;
      x[t * cd + c] = Silu(acc);
    }
    for (int64_t j = 0; j < hist; ++j) window[j * cd + c] = win[j];
  }
}

FAK_DELTA_NET_CLONES void DeltaNetHead(const DeltaNetSpec& s, int64_t h, const float* x, const float* b,
                                       const float* a, int64_t n, float ssm_a, float dt_bias, float* state,
                                       float* out, float* scratch) {
  const int64_t dk = s.k_dim, dv = s.v_dim, cd = s.conv_dim(), kh = s.KeyHead(h);
  float* q = scratch;
  float* k = q + dk;
  float* mem = k + dk;  // k^T S, then the delta
  float* o = mem + dv;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int64_t t = 0; t < n; ++t) {
    const float* row = x + t * cd;
    std::memcpy(q, row + kh * dk, static_cast<size_t>(dk) * 4);
    std::memcpy(k, row + s.n_k_head * dk + kh * dk, static_cast<size_t>(dk) * 4);
    const float* v = row + 2 * s.n_k_head * dk + h * dv;
    L2Normalize(q, dk, s.eps);
    L2Normalize(k, dk, s.eps);
    for (int64_t i = 0; i < dk; ++i) q[i] *= q_scale;
    const float beta = 1.0f / (1.0f + std::exp(-b[t * s.n_v_head + h]));
    const float decay = std::exp(ssm_a * Softplus(a[t * s.n_v_head + h] + dt_bias));
    // S *= decay; mem = k^T S.
    for (int64_t j = 0; j < dv; ++j) mem[j] = 0.0f;
    for (int64_t i = 0; i < dk; ++i) {
      float* si = state + i * dv;
      const float ki = k[i];
      for (int64_t j = 0; j < dv; ++j) {
        si[j] *= decay;
        mem[j] += si[j] * ki;
      }
    }
    // delta = (v - mem) * beta; S += k delta^T; o = q^T S.
    for (int64_t j = 0; j < dv; ++j) {
      mem[j] = (v[j] - mem[j]) * beta;
      o[j] = 0.0f;
    }
    for (int64_t i = 0; i < dk; ++i) {
      float* si = state + i * dv;
      const float ki = k[i], qi = q[i];
      for (int64_t j = 0; j < dv; ++j) {
        si[j] += ki * mem[j];
        o[j] += si[j] * qi;
      }
    }
    std::memcpy(out + t * s.n_v_head * dv + h * dv, o, static_cast<size_t>(dv) * 4);
  }
}

void GatedRmsNorm(const float* x, const float* w, const float* z, float* y, int64_t n_rows, int64_t n,
                  float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n;
    const float* zr = z + r * n;
    float* yr = y + r * n;
    float ss = 0.0f;
    for (int64_t i = 0; i < n; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = w[i] * (xr[i] * inv) * Silu(zr[i]);
  }
}

}  // namespace fak::cpu
