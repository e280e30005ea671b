// The row ops that run inside the matrix-vector products ("tails", kernels.h MatVecTail) and the
// one-warp form of four-piece rows: which ops join a product (host code, runs without a GPU), and that
// every output has the bits of the op's own launch (on a GPU).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <memory>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "backends/cuda/cuda_test_util.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/step.h"
#include "backends/cuda/weights.h"

namespace fak::cuda_test {
namespace {

using cuda::DeviceMatrix;
using cuda::MatVecJob;
using cuda::MatVecTail;
using cuda::Q8Act;
using cuda::TailKind;

// Which row ops join the product before them as its tail (host code: runs without a GPU; nothing is
// launched). A tail joins only the product that wrote exactly what it reads, only once, only inside a
// step and with counters enough; once it has, no bias, residual or further matrix joins that product.
TEST(CudaHost, TailsJoinOnlyTheProductsThatWroteTheirInputs) {
  // Addresses the queue only compares, never reads.
  auto at = [](uintptr_t v) { return reinterpret_cast<float*>(v * 64); };
  unsigned fake_counters[1] = {};
  const cuda::DeviceMatrix q8{cuda::MatFormat::kQ8_0, 0, 1536, nullptr, nullptr};
  auto matrix = [&](int64_t rows) {
    cuda::DeviceMatrix m = q8;
    m.rows = rows;
    return m;
  };
  const Q8Act xq{reinterpret_cast<const int8_t*>(at(90)), at(91)};
  auto out = [&](float* y, int64_t ld) { return cuda::MatVecOut{y, ld, nullptr, nullptr, 0}; };

  cuda::StepQueue sq(nullptr);
  sq.SetTailCounters(fake_counters, 64);
  MatVecTail norm;
  norm.kind = TailKind::kRmsNorm;
  norm.x = at(2);
  norm.cols = 1536;
  norm.y = at(3);
  // Outside a step nothing joins.
  EXPECT_FALSE(sq.FuseTail(norm, 1));

  sq.Begin({1}, true);
  // The o-projection adds into the residual at(2): the norm of at(2) joins it, once.
  ASSERT_EQ(sq.AddMatVec(matrix(1536), out(at(1), 1536), at(10), xq, 1), cudaSuccess);
  ASSERT_TRUE(sq.FuseResidual(at(2), at(1), 1, 1536));
  MatVecTail other = norm;
  other.x = at(4);
  EXPECT_FALSE(sq.FuseTail(other, 1));  // a norm of something else
  EXPECT_FALSE(sq.FuseTail(norm, 2));   // other rows
  EXPECT_TRUE(sq.FuseTail(norm, 1));
  EXPECT_FALSE(sq.FuseTail(norm, 1));                 // only one tail
  EXPECT_FALSE(sq.FuseBias(at(1), 1, 1536, at(50)));  // nothing after the tail
  EXPECT_FALSE(sq.FuseResidual(at(5), at(1), 1, 1536));

  // gate/up: the SiLU of their two outputs joins; not with the outputs swapped, nor too wide a row for
  // the counters, nor after a third matrix joined the product.
  ASSERT_EQ(sq.AddMatVec(matrix(8960), out(at(20), 8960), at(3), xq, 1), cudaSuccess);
  ASSERT_EQ(sq.AddMatVec(matrix(8960), out(at(21), 8960), at(3), xq, 1), cudaSuccess);
  MatVecTail silu;
  silu.kind = TailKind::kSiluMul;
  silu.y = at(21);
  silu.u = at(20);
  silu.cols = 8960;
  EXPECT_FALSE(sq.FuseTail(silu, 1));
  silu.y = at(20);
  silu.u = at(21);
  sq.SetTailCounters(fake_counters, 8960 / 32 - 1);
  EXPECT_FALSE(sq.FuseTail(silu, 1));
  sq.SetTailCounters(fake_counters, 8960 / 32);
  EXPECT_TRUE(sq.FuseTail(silu, 1));
  // A further matrix over the same activations starts a product of its own (which takes a bias).
  ASSERT_EQ(sq.AddMatVec(matrix(8960), out(at(22), 8960), at(3), xq, 1), cudaSuccess);
  EXPECT_TRUE(sq.FuseBias(at(22), 1, 8960, at(51)));

  // q/k/v of 12 and 2 heads of 128: the rope joins; not with a head size the block rounds straddle, nor
  // with fewer counters than q and k heads.
  sq.SetTailCounters(fake_counters, 64);
  ASSERT_EQ(sq.AddMatVec(matrix(1536), out(at(30), 1536), at(40), xq, 1), cudaSuccess);
  ASSERT_EQ(sq.AddMatVec(matrix(256), out(at(31), 256), at(40), xq, 1), cudaSuccess);
  ASSERT_EQ(sq.AddMatVec(matrix(256), out(at(32), 256), at(40), xq, 1), cudaSuccess);
  MatVecTail rope;
  rope.kind = TailKind::kRopeKvWrite;
  rope.rq = at(30);
  rope.q_cols = 1536;
  rope.k = at(31);
  rope.v = at(32);
  rope.head_dim = 128;
  rope.kv.n_kv_head = 2;
  rope.kv.head_dim = 128;
  sq.SetTailCounters(fake_counters, 13);
  EXPECT_FALSE(sq.FuseTail(rope, 1));
  sq.SetTailCounters(fake_counters, 14);
  MatVecTail odd = rope;
  odd.head_dim = 126;
  EXPECT_FALSE(sq.FuseTail(odd, 1));
  EXPECT_TRUE(sq.FuseTail(rope, 1));
  sq.Discard();

  // Without counters no tail joins.
  sq.SetTailCounters(nullptr, 0);
  sq.Begin({1}, true);
  ASSERT_EQ(sq.AddMatVec(matrix(1536), out(at(1), 1536), at(10), xq, 1), cudaSuccess);
  ASSERT_TRUE(sq.FuseResidual(at(2), at(1), 1, 1536));
  EXPECT_FALSE(sq.FuseTail(norm, 1));
  sq.Discard();
}

// Where a bias add joins (host code, nothing launched): the product that wrote its rows, also past later
// products that neither read nor write them (q and k in one product, v in another when v's matrix has
// another format, as in Q4_K_M files); not past a product that reads them, nor past any other op.
TEST(CudaHost, BiasesJoinTheProductThatWroteTheirRows) {
  auto at = [](uintptr_t v) { return reinterpret_cast<float*>(v << 20); };  // 1 MiB apart: no overlaps
  auto matrix = [](cuda::MatFormat f, int64_t rows) {
    return cuda::DeviceMatrix{f, rows, 1536, nullptr, nullptr};
  };
  const Q8Act xq{reinterpret_cast<const int8_t*>(at(90)), at(91), 256};
  auto out = [&](float* y, int64_t ld) { return cuda::MatVecOut{y, ld, nullptr, nullptr, 0}; };
  cuda::StepQueue sq(nullptr);
  sq.Begin({1}, true);
  ASSERT_EQ(sq.AddMatVec(matrix(cuda::MatFormat::kQ4_K, 1536), out(at(1), 1536), at(10), xq, 1), cudaSuccess);
  ASSERT_EQ(sq.AddMatVec(matrix(cuda::MatFormat::kQ4_K, 256), out(at(2), 256), at(10), xq, 1), cudaSuccess);
  ASSERT_EQ(sq.AddMatVec(matrix(cuda::MatFormat::kQ6_K, 256), out(at(3), 256), at(10), xq, 1), cudaSuccess);
  EXPECT_FALSE(sq.FuseBias(at(1), 2, 1536, at(50)));  // other rows
  EXPECT_TRUE(sq.FuseBias(at(1), 1, 1536, at(50)));
  EXPECT_TRUE(sq.FuseBias(at(2), 1, 256, at(51)));
  EXPECT_TRUE(sq.FuseBias(at(3), 1, 256, at(52)));
  EXPECT_FALSE(sq.FuseBias(at(1), 1, 1536, at(50)));  // it has its bias
  // A product reads at(1) after the one that wrote it: the add must come before that read.
  ASSERT_EQ(sq.AddMatVec(matrix(cuda::MatFormat::kQ4_K, 1536), out(at(4), 1536), at(10), xq, 1), cudaSuccess);
  ASSERT_EQ(sq.AddMatVec(matrix(cuda::MatFormat::kQ8_0, 1536), out(at(5), 1536), at(4), xq, 1), cudaSuccess);
  EXPECT_FALSE(sq.FuseBias(at(4), 1, 1536, at(53)));
  EXPECT_TRUE(sq.FuseBias(at(5), 1, 1536, at(53)));
  // Nor past an op that is not a product (what it reads is not known here).
  ASSERT_EQ(sq.AddMatVec(matrix(cuda::MatFormat::kQ4_K, 1536), out(at(6), 1536), at(10), xq, 1), cudaSuccess);
  ASSERT_EQ(sq.Add("Other", {1}, [](cudaStream_t) { return cudaSuccess; }), cudaSuccess);
  EXPECT_FALSE(sq.FuseBias(at(6), 1, 1536, at(54)));
  sq.Discard();
}

// Device memory for the kernel-level tests: `n` elements, zeroed, or a copy of host values.
template <typename T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t count) : n(count) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, 0, std::max<size_t>(count, 1) * sizeof(T)), cudaSuccess);
  }
  explicit DevBuf(const std::vector<T>& v) : DevBuf(v.size()) { Set(v); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { cudaFree(p); }
  void Set(const std::vector<T>& v) {
    ASSERT_EQ(v.size(), n);
    ASSERT_EQ(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<uint8_t> Bytes() const {
    std::vector<uint8_t> v(n * sizeof(T));
    EXPECT_EQ(cudaMemcpy(v.data(), p, v.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

// A matrix in its device layout, uploaded.
struct DevMatrix {
  std::unique_ptr<DevBuf<uint8_t>> q;
  std::unique_ptr<DevBuf<uint16_t>> d;
  DeviceMatrix m;
  DevMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
    const TestMatrix t = MakeMatrix(type, rows, cols, seed);
    auto h = cuda::RepackForDevice(t.weight());
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    q = std::make_unique<DevBuf<uint8_t>>(h->q);
    d = std::make_unique<DevBuf<uint16_t>>(h->d);
    m = {h->format, rows, cols, q->p, h->d.empty() ? nullptr : d->p};
  }
};

// The op after a one-row product run inside the product's kernel (FAK_CUDA_TAILS=1: the norm in the
// last block, the SiLU per 32 outputs, the rope per head and the values' KV store per row) leaves every
// output with the bits of the product followed by the op's own kernel (FAK_CUDA_TAILS=0), twice in a row
// (the counters return to zero), at shapes with one and four warps per row, one and two rounds of rows
// per block, a norm wider than the tail's registers, partial and interleaved rotary, f16 and f32 caches.
TEST(CudaOps, TailsGiveTheBitsOfTheirOwnKernels) {
  SKIP_WITHOUT_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  DevBuf<unsigned> counters(4096);
  struct Run {
    std::function<void()> init;                      // the inputs the ops update in place, reset
    std::function<std::vector<uint8_t>()> snapshot;  // every output
  };
  // With FAK_CUDA_TAILS=1 a job whose tail has no counter runs the op as its own launch after the
  // product (the reference: with the norm tail on, the norm's own kernel takes the tail's order), one
  // with the counter runs it inside; twice.
  auto check = [&](const MatVecJob& job, const float* x, Q8Act xq, const Run& run) {
    const ScopedEnv tails("FAK_CUDA_TAILS", "1");
    EXPECT_TRUE(cuda::TailInKernel(job.tail.kind));
    std::vector<uint8_t> got[3];
    const bool inside[3] = {false, true, true};
    for (int i = 0; i < 3; ++i) {
      MatVecJob j = job;
      if (!inside[i]) j.tail.counter = nullptr;
      run.init();
      ASSERT_EQ(cuda::MatVec(j, x, xq, 1, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      got[i] = run.snapshot();
    }
    EXPECT_TRUE(got[0] == got[1]) << "the tail in the kernel differs from its own launch";
    EXPECT_TRUE(got[1] == got[2]) << "a second launch differs from the first";
    const std::vector<uint8_t> zeros(counters.n * sizeof(unsigned), 0);
    EXPECT_TRUE(counters.Bytes() == zeros) << "counters left non-zero";
  };
  // One activation row and its shadow, in the groups the matrix's format reads.
  auto activations = [](int64_t cols, uint32_t seed, DevBuf<float>& x, DevBuf<int8_t>& q, DevBuf<float>& d,
                        int group) {
    x.Set(Random(static_cast<size_t>(cols), seed));
    ASSERT_EQ(cuda::Quantize(x.p, 1, cols, q.p, d.p, group, nullptr), cudaSuccess);
  };
  auto cat = [](std::initializer_list<std::vector<uint8_t>> parts) {
    std::vector<uint8_t> all;
    for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
  };

  // RMS norm after a product whose epilogue adds into the residual.
  // (8,192: wider than both kernels' registers; 1,000: not whole runs, no shadow.)
  for (const auto& [type, d, cin] :
       {std::tuple{GgmlType::kQ8_0, 1536, 1536}, std::tuple{GgmlType::kQ4_K, 2560, 4096},
        std::tuple{GgmlType::kQ6_K, 896, 4608}, std::tuple{GgmlType::kBF16, 2048, 2048},
        std::tuple{GgmlType::kQ8_0, 8192, 1536}, std::tuple{GgmlType::kQ8_0, 1000, 1536}}) {
    SCOPED_TRACE(fmt::format("norm {} {}x{}", GgmlTypeName(type), d, cin));
    const bool shadow = d % 32 == 0;
    const DevMatrix w(type, d, cin, 11);
    DevBuf<float> x(static_cast<size_t>(cin)), xd(static_cast<size_t>(cin / 32)), y(static_cast<size_t>(d)),
        res(static_cast<size_t>(d)), nw(Random(static_cast<size_t>(d), 12, 0.5f)), h(static_cast<size_t>(d)),
        hd(static_cast<size_t>(d / 32));
    DevBuf<int8_t> xq(static_cast<size_t>(cin)), hq(static_cast<size_t>(d));
    const int group = cuda::GroupFor(w.m.format);
    activations(cin, 13, x, xq, xd, group);
    MatVecJob job;
    job.count = 1;
    job.w[0] = w.m;
    job.out[0] = {.y = y.p, .ldy = d, .bias = nullptr, .residual = res.p, .ldr = d};
    job.tail.kind = TailKind::kRmsNorm;
    job.tail.counter = counters.p;
    job.tail.x = res.p;
    job.tail.w = nw.p;
    job.tail.y = h.p;
    job.tail.cols = d;
    job.tail.eps = 1e-6f;
    job.tail.q = shadow ? hq.p : nullptr;
    job.tail.d = shadow ? hd.p : nullptr;
    const std::vector<float> res0 = Random(static_cast<size_t>(d), 14, 4.0f);
    check(job, x.p, {xq.p, xd.p, group},
          {[&] { res.Set(res0); },
           [&] {
             return cat({y.Bytes(), res.Bytes(), h.Bytes(), hq.Bytes(), hd.Bytes()});
           }});
  }

  // SiLU(gate) * up after the gate/up product, with the int8 shadow.
  for (const auto& [type, f, cin] :
       {std::tuple{GgmlType::kQ8_0, 8960, 1536}, std::tuple{GgmlType::kQ4_K, 4128, 4096},
        std::tuple{GgmlType::kQ6_K, 1024, 1536}}) {
    SCOPED_TRACE(fmt::format("silu {} {}x{}", GgmlTypeName(type), f, cin));
    const DevMatrix gate(type, f, cin, 21), up(type, f, cin, 22);
    DevBuf<float> x(static_cast<size_t>(cin)), xd(static_cast<size_t>(cin / 32)), g(static_cast<size_t>(f)),
        u(static_cast<size_t>(f)), gd(static_cast<size_t>(f / 32));
    DevBuf<int8_t> xq(static_cast<size_t>(cin)), gq(static_cast<size_t>(f));
    const int group = cuda::GroupFor(gate.m.format);
    activations(cin, 23, x, xq, xd, group);
    MatVecJob job;
    job.count = 2;
    job.w[0] = gate.m;
    job.w[1] = up.m;
    job.out[0] = {.y = g.p, .ldy = f, .bias = nullptr, .residual = nullptr, .ldr = 0};
    job.out[1] = {.y = u.p, .ldy = f, .bias = nullptr, .residual = nullptr, .ldr = 0};
    job.tail.kind = TailKind::kSiluMul;
    job.tail.counter = counters.p;
    job.tail.y = g.p;
    job.tail.u = u.p;
    job.tail.cols = f;
    job.tail.q = gq.p;
    job.tail.d = gd.p;
    check(job, x.p, {xq.p, xd.p, group},
          {[] {},
           [&] {
             return cat({g.Bytes(), u.Bytes(), gq.Bytes(), gd.Bytes()});
           }});
  }

  // Rope of q and k and the KV store of k and v after the q/k/v product (with biases).
  struct RopeCase {
    GgmlType type;
    int64_t hd, nq, nkv, half, cin;
    bool neox, f32;
  };
  for (const RopeCase& c : {RopeCase{GgmlType::kQ8_0, 128, 12, 2, 64, 1536, true, false},
                            RopeCase{GgmlType::kQ4_K, 64, 8, 4, 16, 4096, false, true},
                            RopeCase{GgmlType::kBF16, 128, 4, 1, 64, 1024, true, false}}) {
    SCOPED_TRACE(fmt::format("rope {} hd {} half {} neox {} f32 {}", GgmlTypeName(c.type), c.hd, c.half,
                             c.neox, c.f32));
    const int64_t qc = c.nq * c.hd, kc = c.nkv * c.hd, pt = 16, pos = 21, layer = 1, n_layer = 2;
    const DevMatrix wq(c.type, qc, c.cin, 31), wk(c.type, kc, c.cin, 32), wv(c.type, kc, c.cin, 33);
    DevBuf<float> x(static_cast<size_t>(c.cin)), xd(static_cast<size_t>(c.cin / 32)),
        q(static_cast<size_t>(qc)), k(static_cast<size_t>(kc)), v(static_cast<size_t>(kc)),
        bq(Random(static_cast<size_t>(qc), 34)), bk(Random(static_cast<size_t>(kc), 35)),
        bv(Random(static_cast<size_t>(kc), 36)), cs(Random(static_cast<size_t>(2 * c.half), 37));
    DevBuf<int8_t> xq(static_cast<size_t>(c.cin));
    const int group = cuda::GroupFor(wq.m.format);
    activations(c.cin, 38, x, xq, xd, group);
    const size_t page_elems = static_cast<size_t>(n_layer * 2 * c.nkv * pt * c.hd);
    DevBuf<uint8_t> page(page_elems * (c.f32 ? 4 : 2));
    DevBuf<uint64_t> page_ptr(std::vector<uint64_t>{reinterpret_cast<uint64_t>(page.p)});
    DevBuf<int32_t> positions(std::vector<int32_t>{static_cast<int32_t>(pos)}),
        row_seq(std::vector<int32_t>{0}), page_begin(std::vector<int32_t>{0, 2}),
        pages(std::vector<int32_t>{1, 0});
    MatVecJob job;
    job.count = 3;
    job.w[0] = wq.m;
    job.w[1] = wk.m;
    job.w[2] = wv.m;
    job.out[0] = {.y = q.p, .ldy = qc, .bias = bq.p, .residual = nullptr, .ldr = 0};
    job.out[1] = {.y = k.p, .ldy = kc, .bias = bk.p, .residual = nullptr, .ldr = 0};
    job.out[2] = {.y = v.p, .ldy = kc, .bias = bv.p, .residual = nullptr, .ldr = 0};
    MatVecTail& t = job.tail;
    t.kind = TailKind::kRopeKvWrite;
    t.counter = counters.p;
    t.rq = q.p;
    t.q_cols = qc;
    t.k = k.p;
    t.v = v.p;
    t.head_dim = c.hd;
    t.half = c.half;
    t.layer = layer;
    t.cos_sin = cs.p;
    t.neox = c.neox;
    t.kv.page_ptr = reinterpret_cast<void* const*>(page_ptr.p);
    t.kv.n_kv_head = c.nkv;
    t.kv.head_dim = c.hd;
    t.kv.page_tokens = pt;
    t.kv.f32 = c.f32;
    t.b.positions = positions.p;
    t.b.row_seq = row_seq.p;
    t.b.page_begin = page_begin.p;
    t.b.pages = pages.p;
    // Position 21 of 16-token pages: the sequence's second page, which is page 0 of the store.
    check(job, x.p, {xq.p, xd.p, group},
          {[&] { ASSERT_EQ(cudaMemset(page.p, 0, page.n), cudaSuccess); },
           [&] {
             return cat({q.Bytes(), k.Bytes(), v.Bytes(), page.Bytes()});
           }});
  }
}

}  // namespace
}  // namespace fak::cuda_test
