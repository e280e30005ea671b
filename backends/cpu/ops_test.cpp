// The CPU ops against plain double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/attention.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/exp.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/ops.h"

namespace fak {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Ops, RmsNormMatchesDoubleReference) {
  const int64_t rows = 3, n = 100;
  auto x = Random(rows * n, 1), w = Random(n, 2);
  std::vector<float> y(rows * n);
  cpu::RmsNorm(x.data(), w.data(), y.data(), rows, n, 1e-6f);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
    const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[r * n + i], x[r * n + i] * inv * w[i], 1e-5);
  }
}

TEST(Ops, RopeRotatesPairsAndKeepsNorms) {
  const int64_t heads = 2, hd = 16;
  std::vector<float> inv(hd / 2);
  for (int64_t i = 0; i < hd / 2; ++i) inv[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / hd));
  for (bool neox : {true, false}) {
    auto x = Random(heads * hd, 3);
    auto at0 = x;
    cpu::Rope(at0.data(), heads, hd, hd, 0, inv.data(), neox, 1.0f);
    EXPECT_EQ(at0, x);  // position 0 is the identity
    auto y = x;
    cpu::Rope(y.data(), heads, hd, hd, 7, inv.data(), neox, 1.0f);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < hd / 2; ++i) {
        const int64_t a = h * hd + (neox ? i : 2 * i), b = h * hd + (neox ? i + hd / 2 : 2 * i + 1);
        const double ang = 7.0 * inv[i];
        EXPECT_NEAR(y[a], x[a] * std::cos(ang) - x[b] * std::sin(ang), 1e-5);
        EXPECT_NEAR(y[b], x[b] * std::cos(ang) + x[a] * std::sin(ang), 1e-5);
      }
    }
  }
}

TEST(Ops, SiluMul) {
  std::vector<float> g = {-2.0f, 0.0f, 3.0f}, u = {1.0f, 5.0f, -2.0f};
  cpu::SiluMul(g.data(), u.data(), 3);
  EXPECT_NEAR(g[0], -2.0 / (1 + std::exp(2.0)), 1e-6);
  EXPECT_EQ(g[1], 0.0f);
  EXPECT_NEAR(g[2], -2.0 * 3.0 / (1 + std::exp(-3.0)), 1e-5);
}

// Keys and values (n positions of head_dim floats) as f16 KV pages of `page` positions.
struct F16Pages {
  F16Pages(const std::vector<float>& kf, const std::vector<float>& vf, int64_t n, int64_t hd, int64_t page)
      : page_tokens(page) {
    const int64_t n_pages = (n + page - 1) / page;
    k.assign(n_pages, std::vector<uint16_t>(page * hd));
    v = k;
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t d = 0; d < hd; ++d) {
        k[j / page][(j % page) * hd + d] = cpu::FloatToHalf(kf[j * hd + d]);
        v[j / page][(j % page) * hd + d] = cpu::FloatToHalf(vf[j * hd + d]);
      }
    }
    for (int64_t p = 0; p < n_pages; ++p) kptr.push_back(k[p].data()), vptr.push_back(v[p].data());
  }
  cpu::HeadKv kv() const { return {kptr.data(), vptr.data(), page_tokens}; }

  int64_t page_tokens;
  std::vector<std::vector<uint16_t>> k, v;
  std::vector<const uint16_t*> kptr, vptr;
};

TEST(Ops, AttentionVariantsMatchDoubleSoftmax) {
  const int64_t hd = 64, page = 16, n_ctx = 37;
  auto q = Random(hd, 4), kf = Random(n_ctx * hd, 5), vf = Random(n_ctx * hd, 6);
  // Pages of f16 keys/values; the reference uses the same f16-rounded values.
  const int64_t n_pages = (n_ctx + page - 1) / page;
  F16Pages pages(kf, vf, n_ctx, hd, page);
  const auto& kp = pages.k;
  const auto& vp = pages.v;
  const cpu::HeadKv kv = pages.kv();
  const float scale = 1.0f / 8.0f;
  std::vector<double> s(n_ctx), want(hd, 0.0);
  double mx = -1e300, sum = 0;
  for (int64_t j = 0; j < n_ctx; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < hd; ++d)
      dot += double(q[d]) * cpu::HalfToFloat(kp[j / page][(j % page) * hd + d]);
    s[j] = dot * scale;
    mx = std::max(mx, s[j]);
  }
  for (int64_t j = 0; j < n_ctx; ++j) sum += (s[j] = std::exp(s[j] - mx));
  for (int64_t j = 0; j < n_ctx; ++j) {
    for (int64_t d = 0; d < hd; ++d)
      want[d] += s[j] / sum * cpu::HalfToFloat(vp[j / page][(j % page) * hd + d]);
  }
  std::vector<float> scores(n_ctx), out(hd);
  std::vector<cpu::AttendHeadFn> fns = {&cpu::AttendHeadPortable};
  if (cpu::Kernels().attend != &cpu::AttendHeadPortable) fns.push_back(cpu::Kernels().attend);
  for (auto fn : fns) {
    fn(q.data(), hd, kv, n_ctx, scale, scores.data(), out.data());
    for (int64_t d = 0; d < hd; ++d) EXPECT_NEAR(out[d], want[d], 1e-5) << d;
  }
  // f32 pages: the same values without f16 rounding, checked against the f32 inputs directly.
  std::vector<std::vector<float>> kf32(n_pages, std::vector<float>(page * hd)), vf32 = kf32;
  for (int64_t j = 0; j < n_ctx; ++j) {
    for (int64_t d = 0; d < hd; ++d) {
      kf32[j / page][(j % page) * hd + d] = kf[j * hd + d];
      vf32[j / page][(j % page) * hd + d] = vf[j * hd + d];
    }
  }
  std::vector<const uint16_t*> k32, v32;
  for (int64_t p = 0; p < n_pages; ++p) {
    k32.push_back(reinterpret_cast<const uint16_t*>(kf32[p].data()));
    v32.push_back(reinterpret_cast<const uint16_t*>(vf32[p].data()));
  }
  cpu::HeadKv kv32{k32.data(), v32.data(), page, true};
  std::vector<double> w32(hd, 0.0), s32(n_ctx);
  mx = -1e300;
  sum = 0;
  for (int64_t j = 0; j < n_ctx; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < hd; ++d) dot += double(q[d]) * kf[j * hd + d];
    mx = std::max(mx, s32[j] = dot * scale);
  }
  for (int64_t j = 0; j < n_ctx; ++j) sum += (s32[j] = std::exp(s32[j] - mx));
  for (int64_t j = 0; j < n_ctx; ++j) {
    for (int64_t d = 0; d < hd; ++d) w32[d] += s32[j] / sum * vf[j * hd + d];
  }
  for (auto fn : fns) {
    fn(q.data(), hd, kv32, n_ctx, scale, scores.data(), out.data());
    for (int64_t d = 0; d < hd; ++d) EXPECT_NEAR(out[d], w32[d], 1e-5) << d;
  }
}

TEST(Ops, CheckFiniteFindsNaNAndInfinityAnywhere) {
  auto be = cpu::CreateCpuBackend({.threads = 2, .pin = false});
  const int64_t rows = 7, cols = 40001;  // large enough to be split over the threads
  auto t = be->Alloc(rows, cols);
  ASSERT_TRUE(t.ok());
  std::fill(t->data, t->data + rows * cols, 1.5f);
  bool finite = false;
  be->CheckFinite(*t, &finite);
  ASSERT_TRUE(be->Synchronize().ok());
  EXPECT_TRUE(finite);
  for (const int64_t at : {int64_t{0}, cols + 3, rows * cols - 1}) {
    for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
      t->data[at] = bad;
      finite = true;
      be->CheckFinite(*t, &finite);
      ASSERT_TRUE(be->Synchronize().ok());
      EXPECT_FALSE(finite) << "at " << at << ": " << bad;
      finite = false;
      be->CheckFinite(t->Rows(3, 2), &finite);  // rows without the bad value
      ASSERT_TRUE(be->Synchronize().ok());
      EXPECT_TRUE(finite) << "at " << at;
      t->data[at] = 1.5f;
    }
  }
  be->Free(*t);
}

TEST(Ops, F32MatMulMatchesDoubleAndIsBatchInvariant) {
  const int64_t rows = 37, cols = 70, tokens = 5;
  auto w = Random(rows * cols, 7), x = Random(tokens * cols, 8);
  Weight wt{GgmlType::kF32, rows, cols, static_cast<size_t>(cols) * 4,
            reinterpret_cast<const uint8_t*>(w.data())};
  auto be = cpu::CreateCpuBackend({.threads = 2, .pin = false});
  auto bw = be->BindMatrix(wt);
  ASSERT_TRUE(bw.ok()) << bw.status().ToString();
  auto xt = be->Alloc(tokens, cols), yt = be->Alloc(tokens, rows), ot = be->Alloc(1, rows);
  ASSERT_TRUE(xt.ok() && yt.ok() && ot.ok());
  std::copy(x.begin(), x.end(), xt->data);  // host memory on the CPU backend
  std::vector<float> y(tokens * rows), one(rows);
  be->MatMul(*bw, *xt, *yt);
  be->Download(*yt, y.data());
  ASSERT_TRUE(be->Synchronize().ok());
  for (int64_t t = 0; t < tokens; ++t) {
    be->MatMul(*bw, xt->Rows(t, 1), *ot);
    be->Download(*ot, one.data());
    ASSERT_TRUE(be->Synchronize().ok());
    for (int64_t r = 0; r < rows; ++r) {
      double ref = 0;
      for (int64_t k = 0; k < cols; ++k) ref += double(w[r * cols + k]) * x[t * cols + k];
      EXPECT_NEAR(y[t * rows + r], ref, 1e-4);
      EXPECT_EQ(y[t * rows + r], one[r]);  // the same row alone gives the same bits
    }
  }
}

TEST(CpuBackend, BindChecksOnceAndErrorsSurfaceAtSynchronize) {
  std::vector<float> table = {1, 2, 3, 4, 5, 6};
  auto be = cpu::CreateCpuBackend({.threads = 1, .pin = false});
  // A q8_0 matrix whose rows are not whole blocks is refused when bound, not when used.
  Weight bad{GgmlType::kQ8_0, 2, 20, 0, reinterpret_cast<const uint8_t*>(table.data())};
  EXPECT_FALSE(be->BindMatrix(bad).ok());
  Weight w{GgmlType::kF32, 3, 2, 8, reinterpret_cast<const uint8_t*>(table.data())};
  auto emb = be->BindEmbedding(w, GgmlType::kF32);
  ASSERT_TRUE(emb.ok());
  auto out = be->Alloc(2, 2);
  ASSERT_TRUE(out.ok());
  const int32_t tokens[] = {2, 3}, zeros[] = {0, 0}, begin[] = {0, 0};
  be->SetBatch(BatchPlan{tokens, zeros, zeros, begin, {}, {}, 1, {}});
  be->Embed(*emb, *out);  // token 3 is outside the table: queued, reported later
  Status s = be->Synchronize();
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("token id 3"), std::string::npos) << s.message();
  EXPECT_TRUE(be->Synchronize().ok());  // the error was reported once
}

TEST(Ops, EmbeddingRowChecksTheId) {
  std::vector<float> table = {1, 2, 3, 4, 5, 6};
  Weight w{GgmlType::kF32, 3, 2, 8, reinterpret_cast<const uint8_t*>(table.data())};
  float out[2];
  ASSERT_TRUE(cpu::EmbeddingRow(w, 2, out, GgmlType::kF32).ok());
  EXPECT_EQ(out[0], 5.0f);
  EXPECT_EQ(cpu::EmbeddingRow(w, 3, out, GgmlType::kF32).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(cpu::EmbeddingRow(w, -1, out, GgmlType::kF32).code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace fak

namespace fak {
namespace {

TEST(Ops, ExpFastIsCloseToExpAndSimdFormsGiveTheSameBits) {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    worst = std::max(worst, std::fabs(cpu::ExpFast(x) / std::exp(double(x)) - 1.0));
  }
  EXPECT_LT(worst, 4e-7);
  // A NaN stays NaN in the vector form as in the scalar one (a NaN gate or score must not become a
  // finite value that hides it from the non-finite checks).
  {
    std::vector<float> g(16, 1.0f), u(16, 1.0f), h;
    g[3] = std::nanf("");
    h = g;
    cpu::SiluMul(g.data(), u.data(), 16);
    cpu::Kernels().silu_mul(h.data(), u.data(), 16);
    EXPECT_TRUE(std::isnan(g[3]));
    EXPECT_TRUE(std::isnan(h[3]));
    EXPECT_TRUE(std::isnan(cpu::ExpFast(std::nanf(""))));
  }
  // SiluMul: the table's kernel equals the scalar reference for every length (vector body + tail).
  auto g0 = Random(1000, 21, 4.0f), u = Random(1000, 22);
  for (int64_t n : {1, 7, 8, 9, 64, 1000}) {
    std::vector<float> a(g0.begin(), g0.begin() + n), b = a;
    cpu::SiluMul(a.data(), u.data(), n);
    cpu::Kernels().silu_mul(b.data(), u.data(), n);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), n * 4)) << n;
  }
}

// On AVX-512 machines the grouped kernel is attention_avx512.cpp and the one-head kernel the AVX2 one:
// equal bits here also check that the 16-lane kernel keeps the 8-lane arithmetic (head sizes 64 and 128
// take its unrolled value sums, 80 the general one, 72 its fallback).
TEST(Ops, GroupedAttentionGivesEachHeadsOneHeadBits) {
  const int64_t page = 16, group = 7;
  for (int64_t hd : {64, 72, 80, 128})
    for (int64_t n_ctx : {1, 5, 64, 65, 150}) {
      const int64_t n_pages = (n_ctx + page - 1) / page;
      auto kf = Random(n_pages * page * hd, 31), vf = Random(n_pages * page * hd, 32);
      F16Pages pages(kf, vf, n_pages * page, hd, page);
      const cpu::HeadKv kv = pages.kv();
      auto q = Random(group * hd, 33);
      const cpu::KernelTable& k = cpu::Kernels();
      std::vector<float> scratch(cpu::AttendScratchFloats(group, hd, n_ctx)), grouped(group * hd), one(hd);
      k.attend_group(q.data(), group, hd, kv, n_ctx, 0.125f, scratch.data(), grouped.data());
      for (int64_t g = 0; g < group; ++g) {
        k.attend_group(&q[g * hd], 1, hd, kv, n_ctx, 0.125f, scratch.data(), one.data());
        ASSERT_EQ(0, std::memcmp(one.data(), &grouped[g * hd], hd * 4)) << "head " << g << " n_ctx " << n_ctx;
        k.attend(&q[g * hd], hd, kv, n_ctx, 0.125f, scratch.data(), one.data());
        ASSERT_EQ(0, std::memcmp(one.data(), &grouped[g * hd], hd * 4))
            << "one-head kernel, head " << g << " hd " << hd;
      }
    }
}

}  // namespace
}  // namespace fak
