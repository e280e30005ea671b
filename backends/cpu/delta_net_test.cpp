// The Gated-DeltaNet recurrence (backends/cpu/delta_net.cpp) against a plain reference, for every
// compiled CPU target (x86 clones here, NEON under qemu in the cross build).
#include "backends/cpu/delta_net.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace fak::cpu {
namespace {

// The gated delta rule of one head, written plainly (this file is built for the baseline ISA, without
// contraction into FMA): DeltaNetHead, in whichever ISA clone this CPU runs, gives its bits. Both
// orders of value heads: tiled (head h reads key head h % 2) and grouped (h / 2).
class DeltaNetHeads : public testing::TestWithParam<bool> {};

TEST_P(DeltaNetHeads, HeadIsBitIdenticalToThePlainRecurrence) {
  const bool grouped = GetParam();
  DeltaNetSpec s;
  s.grouped = grouped;
  s.n_k_head = 2;
  s.n_v_head = 4;
  s.k_dim = 128;
  s.v_dim = 128;
  s.conv_kernel = 4;
  const int64_t n = 9, cd = s.conv_dim();
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cd)), b(static_cast<size_t>(n * s.n_v_head)), a(b.size());
  for (float& v : x) v = nd(rng);
  for (float& v : b) v = nd(rng);
  for (float& v : a) v = nd(rng);
  for (int64_t h = 0; h < s.n_v_head; ++h) {
    std::vector<float> state(static_cast<size_t>(s.k_dim * s.v_dim)), ref_state(state.size());
    for (size_t i = 0; i < state.size(); ++i) state[i] = ref_state[i] = 0.01f * nd(rng);
    std::vector<float> out(static_cast<size_t>(n * s.n_v_head * s.v_dim)), ref(out.size());
    std::vector<float> scratch(static_cast<size_t>(2 * (s.k_dim + s.v_dim)));
    const float ssm_a = -0.7f, dt = 0.3f;
    DeltaNetHead(s, h, x.data(), b.data(), a.data(), n, ssm_a, dt, state.data(), out.data(), scratch.data());
    const int64_t kh = grouped ? h / 2 : h % 2, dk = s.k_dim, dv = s.v_dim;
    for (int64_t t = 0; t < n; ++t) {
      std::vector<float> q(x.begin() + t * cd + kh * dk, x.begin() + t * cd + kh * dk + dk);
      std::vector<float> k(x.begin() + t * cd + (s.n_k_head + kh) * dk,
                           x.begin() + t * cd + (s.n_k_head + kh) * dk + dk);
      const float* v = &x[static_cast<size_t>(t * cd + 2 * s.n_k_head * dk + h * dv)];
      for (auto* u : {&q, &k}) {
        float ss = 0.0f;
        for (float e : *u) ss += e * e;
        const float inv = 1.0f / std::sqrt(ss + s.eps);
        for (float& e : *u) e *= inv;
      }
      for (float& e : q) e *= 1.0f / std::sqrt(static_cast<float>(dk));
      const float beta = 1.0f / (1.0f + std::exp(-b[static_cast<size_t>(t * s.n_v_head + h)]));
      const float av = a[static_cast<size_t>(t * s.n_v_head + h)] + dt;
      const float decay = std::exp(ssm_a * (av > 20.0f ? av : std::log1p(std::exp(av))));
      std::vector<float> mem(static_cast<size_t>(dv), 0.0f), o(static_cast<size_t>(dv), 0.0f);
      for (int64_t i = 0; i < dk; ++i) {
        for (int64_t j = 0; j < dv; ++j) {
          float& sij = ref_state[static_cast<size_t>(i * dv + j)];
          sij *= decay;
          mem[static_cast<size_t>(j)] += sij * k[static_cast<size_t>(i)];
        }
      }
      for (int64_t j = 0; j < dv; ++j)
        mem[static_cast<size_t>(j)] = (v[j] - mem[static_cast<size_t>(j)]) * beta;
      for (int64_t i = 0; i < dk; ++i) {
        for (int64_t j = 0; j < dv; ++j) {
          float& sij = ref_state[static_cast<size_t>(i * dv + j)];
          sij += k[static_cast<size_t>(i)] * mem[static_cast<size_t>(j)];
          o[static_cast<size_t>(j)] += sij * q[static_cast<size_t>(i)];
        }
      }
      std::memcpy(&ref[static_cast<size_t>(t * s.n_v_head * dv + h * dv)], o.data(),
                  static_cast<size_t>(dv) * 4);
    }
    EXPECT_EQ(std::memcmp(state.data(), ref_state.data(), state.size() * 4), 0) << "head " << h;
    for (int64_t t = 0; t < n; ++t) {
      EXPECT_EQ(
          std::memcmp(&out[static_cast<size_t>(t * s.n_v_head * dv + h * dv)],
                      &ref[static_cast<size_t>(t * s.n_v_head * dv + h * dv)], static_cast<size_t>(dv) * 4),
          0)
          << "head " << h << " row " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Order, DeltaNetHeads, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& i) { return i.param ? "Grouped" : "Tiled"; });

}  // namespace
}  // namespace fak::cpu
