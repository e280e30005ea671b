// The activations' int8 shadows in groups of 256 values (kernels.h Q8Act, the K-quant models): each op
// that writes a shadow itself gives the bits of the quantize kernel, and the product that reads it does
// not quantize again. On a machine without a GPU each test says "skipped: no GPU".
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda/backend_impl.h"
#include "backends/cuda/cuda_test_util.h"
#include "backends/cuda/kernels.h"

namespace fak::cuda_test {
namespace {

// Producer output -> product (y1); output + 0 -> product (y2): y1 == y2 bit for bit, and whether the
// first product had to quantize (expect_own: it read the producer's shadow).
void CompareShadow(Backend& b, BoundWeight w, Tensor out, int64_t out_rows, int64_t n, const BatchPlan& plan,
                   const std::function<void()>& produce, bool expect_own) {
  auto& cb = static_cast<cuda::CudaBackend&>(b);
  const Tensor zero =
      Upload(b, std::vector<float>(static_cast<size_t>(n * out.cols), 0.0f), n, out.cols, plan);
  auto y1 = b.Alloc(n, out_rows), y2 = b.Alloc(n, out_rows);
  ASSERT_TRUE(y1.ok() && y2.ok());
  b.SetBatch(plan);
  produce();
  const int64_t before = cb.quantize_ops();
  b.MatMul(w, out, *y1);
  EXPECT_EQ(cb.quantize_ops() - before, expect_own ? 0 : 1) << "the producer's shadow was not read";
  b.Add(out, zero);
  b.MatMul(w, out, *y2);
  EXPECT_EQ(cb.quantize_ops() - before, expect_own ? 1 : 2);
  const std::vector<float> a = Fetch(b, *y1), c = Fetch(b, *y2);
  int64_t differ = 0;
  for (int64_t r = 0; r < n; ++r)
    differ += std::memcmp(&a[static_cast<size_t>(r * out_rows)], &c[static_cast<size_t>(r * out_rows)],
                          static_cast<size_t>(out_rows) * 4) != 0;
  EXPECT_EQ(differ, 0) << differ << " of " << n << " rows differ";
  b.Free(zero);
  b.Free(*y1);
  b.Free(*y2);
}

// Once a K-quant matrix is bound the ops that write activations quantize them in groups of 256 values
// (kernels.h Q8Act): the RMS norm a warp per group (rows too long for that: from its output after a
// barrier; the norm is also checked against float64), alone and as a product's tail, SiLU after the gate and
// up product, and the attention kernels where a group is whole heads of one block (AttnShadowGroups: the
// tensor-core kernel, its decode form and the combine of long contexts; the f32 kernels at head size 256). A
// product that reads such a shadow gives the same bits as after the quantize kernel made it (the tensor made
// stale by adding zeros): per row alone and in a prompt whose rows span several chunks. Where the geometry
// does not allow it (7 heads of 128, f32 caches at 128) the product quantizes.
TEST(CudaOps, ShadowsInGroupsOf256AreTheQuantizeKernels) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 96;
  {
    SCOPED_TRACE("RmsNorm");
    Pair be;
    ASSERT_TRUE(be.gpu);
    Backend& b = *be.gpu;
    // 1,536 and 5,120: outputs held in registers; 1,344: a last group of 2 runs (a Q8_0 product reads
    // the groups); 16,384: too long for the registers.
    for (const auto& [cols, type] : {std::pair{int64_t{1536}, GgmlType::kQ4_K},
                                     {int64_t{5120}, GgmlType::kQ6_K},
                                     {int64_t{1344}, GgmlType::kQ8_0},
                                     {int64_t{16384}, GgmlType::kQ4_K}}) {
      SCOPED_TRACE("cols " + std::to_string(cols));
      const TestMatrix kq = MakeMatrix(GgmlType::kQ4_K, 8, 256, 50);  // makes the groups 256 values
      ASSERT_TRUE(b.BindMatrix(kq.weight()).ok());
      const TestMatrix m = MakeMatrix(type, rows, cols, 51);
      auto w = b.BindMatrix(m.weight());
      std::vector<float> wv = Random(static_cast<size_t>(cols), 52, 0.3f);
      auto nw = b.BindVector({GgmlType::kF32, 1, cols, static_cast<size_t>(cols) * 4,
                              reinterpret_cast<const uint8_t*>(wv.data()), false});
      ASSERT_TRUE(w.ok() && nw.ok());
      for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{40}}) {
        const OneSeq seq(n, 16);
        const std::vector<float> xv = Random(static_cast<size_t>(n * cols), 53);
        const Tensor x = Upload(b, xv, n, cols, seq.plan());
        auto y = b.Alloc(n, cols);
        ASSERT_TRUE(y.ok());
        CompareShadow(
            b, *w, *y, rows, n, seq.plan(), [&] { b.RmsNorm(x, *nw, *y, 1e-6f); }, true);
        // The norm itself (the K-quant models' kernel, a warp per group) against float64.
        std::vector<double> ref(xv.size());
        for (int64_t r = 0; r < n; ++r) {
          double ss = 0;
          for (int64_t i = 0; i < cols; ++i)
            ss += double{xv[static_cast<size_t>(r * cols + i)]} * xv[static_cast<size_t>(r * cols + i)];
          const double inv = 1.0 / std::sqrt(ss / static_cast<double>(cols) + 1e-6);
          for (int64_t i = 0; i < cols; ++i)
            ref[static_cast<size_t>(r * cols + i)] =
                xv[static_cast<size_t>(r * cols + i)] * inv * wv[static_cast<size_t>(i)];
        }
        EXPECT_LT(NormalizedError(Fetch(b, *y).data(), ref.data(), ref.size()), 2e-6);
        b.Free(x);
        b.Free(*y);
      }
    }
  }
  {
    // After a product the norm (the o-projection's residual add, then the norm) and SiLU (gate and up in
    // one product) join it as its tail, run as their own launches after it: they write the groups too.
    SCOPED_TRACE("RmsNorm and SiluMul as a product's tail");
    Pair be;
    ASSERT_TRUE(be.gpu);
    Backend& b = *be.gpu;
    const int64_t d = 1536, f = 2048;
    const TestMatrix mo = MakeMatrix(GgmlType::kQ4_K, d, d, 60), mg = MakeMatrix(GgmlType::kQ4_K, f, d, 61),
                     mu = MakeMatrix(GgmlType::kQ4_K, f, d, 62),
                     mdown = MakeMatrix(GgmlType::kQ6_K, rows, f, 63),
                     mq = MakeMatrix(GgmlType::kQ4_K, rows, d, 64);
    auto wo = b.BindMatrix(mo.weight()), wg = b.BindMatrix(mg.weight()), wu = b.BindMatrix(mu.weight()),
         wdown = b.BindMatrix(mdown.weight()), wq = b.BindMatrix(mq.weight());
    std::vector<float> wv = Random(static_cast<size_t>(d), 65, 0.3f);
    auto nw = b.BindVector({GgmlType::kF32, 1, d, static_cast<size_t>(d) * 4,
                            reinterpret_cast<const uint8_t*>(wv.data()), false});
    ASSERT_TRUE(wo.ok() && wg.ok() && wu.ok() && wdown.ok() && wq.ok() && nw.ok());
    for (const int64_t n : {int64_t{1}, int64_t{3}}) {
      SCOPED_TRACE(std::to_string(n) + " rows");
      const OneSeq seq(n, 16);
      const Tensor x = Upload(b, Random(static_cast<size_t>(n * d), 66), n, d, seq.plan());
      const Tensor a = Upload(b, Random(static_cast<size_t>(n * d), 67), n, d, seq.plan());
      auto o = b.Alloc(n, d), y = b.Alloc(n, d), g = b.Alloc(n, f), u = b.Alloc(n, f);
      ASSERT_TRUE(o.ok() && y.ok() && g.ok() && u.ok());
      CompareShadow(
          b, *wq, *y, rows, n, seq.plan(),
          [&] {
            b.MatMul(*wo, a, *o);
            b.Add(x, *o);
            b.RmsNorm(x, *nw, *y, 1e-6f);
          },
          true);
      CompareShadow(
          b, *wdown, *g, rows, n, seq.plan(), [&] { b.MatMulSwiGLU(*wg, *wu, *y, *g, *u); }, true);
      for (const Tensor t : {x, a, *o, *y, *g, *u}) b.Free(t);
    }
  }
  for (const auto& [hd, n_head, n_kv, f32] : {std::tuple<int64_t, int64_t, int64_t, bool>{128, 12, 2, false},
                                              {64, 16, 4, false},
                                              {256, 12, 2, false},
                                              {128, 28, 4, false},
                                              {128, 12, 2, true}}) {
    SCOPED_TRACE("attention, head_dim " + std::to_string(hd) + ", " + std::to_string(n_head) + " heads" +
                 (f32 ? ", f32 cache" : ""));
    const bool own = cuda::AttnShadowGroups(f32, hd, n_head / n_kv);
    EXPECT_EQ(own, !(hd == 128 && (n_head == 28 || f32)));
    Pair be;
    ASSERT_TRUE(be.gpu);
    Backend& b = *be.gpu;
    const int64_t n = 600, pt = 16, width = n_head * hd;  // contexts past 256 positions: several chunks
    const TestMatrix m = MakeMatrix(GgmlType::kQ4_K, rows, width, 54);
    auto w = b.BindMatrix(m.weight());
    ASSERT_TRUE(w.ok());
    const OneSeq seq(n, pt);
    const Tensor q = Upload(b, Random(static_cast<size_t>(n * width), 55), n, width, seq.plan());
    const Tensor kt = Upload(b, Random(static_cast<size_t>(n * n_kv * hd), 56), n, n_kv * hd, seq.plan());
    const Tensor vt = Upload(b, Random(static_cast<size_t>(n * n_kv * hd), 57), n, n_kv * hd, seq.plan());
    auto kv =
        b.CreateKv({.n_layer = 1, .n_kv_head = n_kv, .head_dim = hd, .page_tokens = pt, .f32 = f32}, 48);
    ASSERT_TRUE(kv.ok());
    ASSERT_TRUE(b.GrowKv(*kv, static_cast<int64_t>(seq.pages.size())).ok());
    b.SetBatch(seq.plan());
    b.KvWrite(*kv, 0, kt, vt);
    auto att = b.Alloc(n, width);
    ASSERT_TRUE(att.ok());
    {
      SCOPED_TRACE("a prompt of 600 rows");
      CompareShadow(
          b, *w, *att, rows, n, seq.plan(), [&] { b.Attention(*kv, 0, q, 0.088f, *att); }, own);
    }
    const std::vector<float> qv = Fetch(b, q);
    for (const int32_t pos : {0, 100, 255, 256, 599}) {  // decode rows of one and of several chunks
      SCOPED_TRACE("a decode row at position " + std::to_string(pos));
      OneSeq one(1, pt);
      one.positions = {pos};
      one.pages = seq.pages;
      one.page_begin = seq.page_begin;
      const Tensor q1 =
          Upload(b, std::vector<float>(qv.begin() + pos * width, qv.begin() + (pos + 1) * width), 1, width,
                 one.plan());
      auto o1 = b.Alloc(1, width);
      ASSERT_TRUE(o1.ok());
      CompareShadow(
          b, *w, *o1, rows, 1, one.plan(), [&] { b.Attention(*kv, 0, q1, 0.088f, *o1); }, own);
      b.Free(q1);
      b.Free(*o1);
    }
    b.Free(q);
    b.Free(kt);
    b.Free(vt);
    b.Free(*att);
  }
}

// The hybrid's attention output gate (SigmoidMul) and the gated norm of its DeltaNet output, which runs
// on the heads' view (a row per value head) of the output projection's input, write that input's shadow
// themselves: in blocks of 32 (no K-quant matrix bound) and in groups of 256 (the norm where whole heads
// tile a group and a product's rows are whole groups: heads of 64, 128 and 256; the gate along its rows,
// a last group shorter). Where they cannot (heads of 96 in groups of 256; a product of 384-value rows
// reading groups the norm would have made across its rows) the product quantizes. Either way its bits
// are the quantize kernel's; the outputs themselves are the same bits in both forms and match the CPU
// backend's.
TEST(CudaOps, GateAndGatedNormShadowsAreTheQuantizeKernels) {
  SKIP_WITHOUT_GPU();
  const int64_t out_rows = 64;
  struct Case {
    int64_t heads, head_dim;
    bool own_256;  // whether the norm makes groups of 256 (blocks of 32: always)
  };
  const std::vector<Case> cases = {
      {6, 128, true}, {8, 64, true}, {3, 256, true}, {8, 96, false}, {3, 128, false}};
  const std::vector<int64_t> gate_cols = {768, 1344};
  std::map<std::string, std::vector<float>> first;  // outputs of the blocks-of-32 pass, by case
  // The output (fetched after the comparison, which adds zeros) against the CPU backend and the first pass.
  auto check = [&](const std::string& key, const std::vector<float>& got, const std::vector<float>& cpu) {
    std::vector<double> ref(cpu.begin(), cpu.end());
    EXPECT_LT(NormalizedError(got.data(), ref.data(), ref.size()), 1e-5) << key;
    auto [it, fresh] = first.emplace(key, got);
    if (!fresh) {
      EXPECT_EQ(std::memcmp(it->second.data(), got.data(), got.size() * 4), 0) << key;
    }
  };
  for (const bool kquant : {false, true}) {
    SCOPED_TRACE(kquant ? "groups of 256" : "blocks of 32");
    Pair be;
    ASSERT_TRUE(be.gpu);
    Backend& b = *be.gpu;
    Backend& cpu = *be.cpu;
    if (kquant) {
      const TestMatrix kq = MakeMatrix(GgmlType::kQ4_K, 8, 256, 70);  // makes the groups 256 values
      ASSERT_TRUE(b.BindMatrix(kq.weight()).ok());
    }
    for (const Case& c : cases) {
      const int64_t cols = c.heads * c.head_dim;
      SCOPED_TRACE(fmt::format("gated norm, {} heads of {}", c.heads, c.head_dim));
      const GgmlType type = kquant && cols % 256 == 0 ? GgmlType::kQ4_K : GgmlType::kQ8_0;
      const TestMatrix m = MakeMatrix(type, out_rows, cols, 71);
      auto w = b.BindMatrix(m.weight());
      std::vector<float> wv = Random(static_cast<size_t>(c.head_dim), 72, 0.3f);
      const Weight nv{GgmlType::kF32,
                      1,
                      c.head_dim,
                      static_cast<size_t>(c.head_dim) * 4,
                      reinterpret_cast<const uint8_t*>(wv.data()),
                      false};
      auto nw = b.BindVector(nv);
      auto nw_cpu = cpu.BindVector(nv);
      ASSERT_TRUE(w.ok() && nw.ok() && nw_cpu.ok());
      for (const int64_t n : {int64_t{1}, int64_t{2}, int64_t{5}}) {
        SCOPED_TRACE(std::to_string(n) + " rows");
        const OneSeq seq(n, 16);
        const std::vector<float> xv = Random(static_cast<size_t>(n * cols), 73),
                                 zv = Random(static_cast<size_t>(n * cols), 74);
        const Tensor x = Upload(b, xv, n, cols, seq.plan()), z = Upload(b, zv, n, cols, seq.plan());
        CompareShadow(
            b, *w, x, out_rows, n, seq.plan(),
            [&] { b.GatedRmsNorm(x.Reshaped(c.head_dim), *nw, z.Reshaped(c.head_dim), 1e-6f); },
            !kquant || c.own_256);
        const Tensor xc = Upload(cpu, xv, n, cols, seq.plan()), zc = Upload(cpu, zv, n, cols, seq.plan());
        cpu.GatedRmsNorm(xc.Reshaped(c.head_dim), *nw_cpu, zc.Reshaped(c.head_dim), 1e-6f);
        check(fmt::format("norm {}x{} n{}", c.heads, c.head_dim, n), Fetch(b, x), Fetch(cpu, xc));
        for (const Tensor t : {x, z}) b.Free(t);
        for (const Tensor t : {xc, zc}) cpu.Free(t);
      }
    }
    for (const int64_t cols : gate_cols) {
      SCOPED_TRACE(fmt::format("gate, rows of {}", cols));
      const GgmlType type = kquant && cols % 256 == 0 ? GgmlType::kQ4_K : GgmlType::kQ8_0;
      const TestMatrix m = MakeMatrix(type, out_rows, cols, 75);
      auto w = b.BindMatrix(m.weight());
      ASSERT_TRUE(w.ok());
      for (const int64_t n : {int64_t{1}, int64_t{5}}) {
        SCOPED_TRACE(std::to_string(n) + " rows");
        const OneSeq seq(n, 16);
        const std::vector<float> xv = Random(static_cast<size_t>(n * cols), 76),
                                 gv = Random(static_cast<size_t>(n * cols), 77);
        const Tensor x = Upload(b, xv, n, cols, seq.plan()), g = Upload(b, gv, n, cols, seq.plan());
        CompareShadow(
            b, *w, x, out_rows, n, seq.plan(), [&] { b.SigmoidMul(x, g); }, true);
        const Tensor xc = Upload(cpu, xv, n, cols, seq.plan()), gc = Upload(cpu, gv, n, cols, seq.plan());
        cpu.SigmoidMul(xc, gc);
        check(fmt::format("gate {} n{}", cols, n), Fetch(b, x), Fetch(cpu, xc));
        for (const Tensor t : {x, g}) b.Free(t);
        for (const Tensor t : {xc, gc}) cpu.Free(t);
      }
    }
  }
}

// The RMS norm in groups of 256 takes a block per group for a few rows (a decode step; with
// FAK_CUDA_NORM_SPREAD=1) and a block per row for more: a row's output and its shadow (read by a product) are
// the same bits either way, at row lengths of one group, several, and a last group shorter than 256.
TEST(CudaOps, RmsNormRowsAreBitIdenticalAloneAndInABatch) {
  SKIP_WITHOUT_GPU();
  const ScopedEnv spread("FAK_CUDA_NORM_SPREAD", "1");
  Pair be;
  ASSERT_TRUE(be.gpu);
  Backend& b = *be.gpu;
  const TestMatrix kq = MakeMatrix(GgmlType::kQ4_K, 8, 256, 80);  // makes the groups 256 values
  ASSERT_TRUE(b.BindMatrix(kq.weight()).ok());
  const int64_t n = 40, out_rows = 64;
  for (const int64_t cols : {int64_t{256}, int64_t{2048}, int64_t{5120}, int64_t{1344}}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const TestMatrix m = MakeMatrix(cols % 256 == 0 ? GgmlType::kQ4_K : GgmlType::kQ8_0, out_rows, cols, 81);
    auto w = b.BindMatrix(m.weight());
    std::vector<float> wv = Random(static_cast<size_t>(cols), 82, 0.3f);
    auto nw = b.BindVector({GgmlType::kF32, 1, cols, static_cast<size_t>(cols) * 4,
                            reinterpret_cast<const uint8_t*>(wv.data()), false});
    ASSERT_TRUE(w.ok() && nw.ok());
    const std::vector<float> xv = Random(static_cast<size_t>(n * cols), 83);
    // All n rows at once.
    const OneSeq all(n, 16);
    const Tensor x = Upload(b, xv, n, cols, all.plan());
    auto y = b.Alloc(n, cols), p = b.Alloc(n, out_rows);
    ASSERT_TRUE(y.ok() && p.ok());
    b.SetBatch(all.plan());
    b.RmsNorm(x, *nw, *y, 1e-6f);
    b.MatMul(*w, *y, *p);
    const std::vector<float> ya = Fetch(b, *y), pa = Fetch(b, *p);
    // Rows 0, 1 and 39 alone, and rows 10-14 as a batch of 5.
    for (const auto& [first, rows] : {std::pair{int64_t{0}, int64_t{1}},
                                      {int64_t{1}, int64_t{1}},
                                      {int64_t{39}, int64_t{1}},
                                      {int64_t{10}, int64_t{5}}}) {
      SCOPED_TRACE(fmt::format("rows {} to {}", first, first + rows - 1));
      const OneSeq some(rows, 16);
      const Tensor xs =
          Upload(b, std::vector<float>(xv.begin() + first * cols, xv.begin() + (first + rows) * cols), rows,
                 cols, some.plan());
      auto ys = b.Alloc(rows, cols), ps = b.Alloc(rows, out_rows);
      ASSERT_TRUE(ys.ok() && ps.ok());
      b.SetBatch(some.plan());
      b.RmsNorm(xs, *nw, *ys, 1e-6f);
      b.MatMul(*w, *ys, *ps);
      const std::vector<float> yb = Fetch(b, *ys), pb = Fetch(b, *ps);
      EXPECT_EQ(std::memcmp(yb.data(), &ya[static_cast<size_t>(first * cols)], yb.size() * 4), 0)
          << "the norm's output differs";
      EXPECT_EQ(std::memcmp(pb.data(), &pa[static_cast<size_t>(first * out_rows)], pb.size() * 4), 0)
          << "the product of its shadow differs";
      for (const Tensor t : {xs, *ys, *ps}) b.Free(t);
    }
    for (const Tensor t : {x, *y, *p}) b.Free(t);
  }
}

}  // namespace
}  // namespace fak::cuda_test
