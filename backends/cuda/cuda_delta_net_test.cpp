// The CUDA backend's Gated-DeltaNet ops (the hybrid's recurrent layers) against the CPU backend, and the
// convolution's prompt kernel against its serial form bit for bit. On a machine without a GPU each test
// says "skipped: no GPU".
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

#include "backends/cuda/cuda_test_util.h"

namespace fak::cuda_test {
namespace {

// A row's MatMul result is the same bits alone and inside batches of any size: batches of 16 rows or
// more of the quantized formats run on the tensor-core GEMM, smaller ones on the matrix-vector kernel,
// and both sum in the same order. The shapes cover a partial last tile of weight rows and of activation
// rows, rows of 4096+ weights (four pieces), and a row length that ends inside a segment (896).
// The finiteness check reads the tensor where it is: a NaN or an infinity at its first or last value
// or in between is found, with the tensor starting at any float (not only 16-byte) boundary.
// Three sequences of lengths[q] rows each in state slots `slots`, at positions continuing *next_pos
// (advanced), every row's output wanted: the batches of the DeltaNet tests.
struct SlotBatch {
  std::vector<int32_t> tokens, positions, row_seq, out_rows, page_begin = {0, 0, 0, 0}, pages, slots;
  SlotBatch(const std::vector<int64_t>& lengths, const std::vector<int32_t>& slot_ids,
            std::vector<int32_t>* next_pos)
      : slots(slot_ids) {
    for (int32_t q = 0; q < 3; ++q) {
      for (int64_t r = 0; r < lengths[static_cast<size_t>(q)]; ++r) {
        out_rows.push_back(static_cast<int32_t>(tokens.size()));
        tokens.push_back(0);
        positions.push_back((*next_pos)[static_cast<size_t>(q)]++);
        row_seq.push_back(q);
      }
    }
  }
  int64_t rows() const { return std::ssize(tokens); }
  BatchPlan plan() const { return {tokens, positions, row_seq, page_begin, pages, out_rows, 1, slots}; }
};

// A Gated-DeltaNet layer's convolution and gated delta rule against the CPU backend: at a real model's
// head sizes (128) and at odd ones (40 value columns, a partial column group; a width-3 convolution),
// three sequences of 1, 9 and 70 rows in one batch in slots out of order, then two batches that
// continue their states (both the convolution window and the recurrent state carry over; the third,
// of 300, 1 and 129 rows, takes the convolution's prompt kernel); and value heads grouped by key head
// (Qwen3-Next's order).
TEST(CudaOps, DeltaNetLayerMatchesTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  struct Geometry {
    int64_t nk, nv, dk, dv, kernel;
    bool grouped;
  };
  for (const Geometry& g : {Geometry{2, 4, 128, 128, 4, false}, Geometry{1, 3, 64, 40, 3, false},
                            Geometry{2, 6, 128, 64, 4, true}}) {
    SCOPED_TRACE(
        fmt::format("k {}x{} v {}x{} conv {} grouped {}", g.nk, g.dk, g.nv, g.dv, g.kernel, g.grouped));
    DeltaNetSpec spec;
    spec.grouped = g.grouped;
    spec.n_k_head = g.nk;
    spec.n_v_head = g.nv;
    spec.k_dim = g.dk;
    spec.v_dim = g.dv;
    spec.conv_kernel = g.kernel;
    spec.state_offset = 256;
    const int64_t cd = spec.conv_dim(), nv = g.nv;
    const std::vector<float> conv = Random(static_cast<size_t>(cd * g.kernel), 3, 0.5f);
    std::vector<float> ssm_a = Random(static_cast<size_t>(nv), 4),
                       dt_bias = Random(static_cast<size_t>(nv), 5);
    for (float& v : ssm_a) v = -(0.5f + std::fabs(v));  // -exp(A_log) < 0: a decay below 1
    struct Side {
      Backend* be;
      int32_t dn, states;
      BoundWeight conv, ssm_a, dt_bias;
    };
    std::vector<Side> sides;
    for (Backend* b : {be.cpu.get(), be.gpu.get()}) {
      Side s{b, 0, 0, {}, {}, {}};
      auto dn = b->BindDeltaNet(spec);
      ASSERT_TRUE(dn.ok()) << dn.status().ToString();
      s.dn = *dn;
      auto st = b->CreateStates(spec.state_offset + spec.StateBytes(), 3);
      ASSERT_TRUE(st.ok());
      s.states = *st;
      auto vec = [&](const std::vector<float>& v, int64_t rows, int64_t cols) {
        auto w = b->BindVector({GgmlType::kF32, rows, cols, static_cast<size_t>(cols) * 4,
                                reinterpret_cast<const uint8_t*>(v.data()), false});
        EXPECT_TRUE(w.ok());
        return w.ok() ? *w : BoundWeight{};
      };
      s.conv = vec(conv, cd, g.kernel);
      s.ssm_a = vec(ssm_a, 1, nv);
      s.dt_bias = vec(dt_bias, 1, nv);
      sides.push_back(s);
    }
    const std::vector<int32_t> slots = {2, 0, 1};
    std::vector<int32_t> next_pos(3, 0);
    for (const std::vector<int64_t>& lengths :
         {std::vector<int64_t>{1, 9, 70}, std::vector<int64_t>{5, 1, 33},
          std::vector<int64_t>{300, 1, 129}}) {
      const SlotBatch batch(lengths, slots, &next_pos);
      const BatchPlan plan = batch.plan();
      const int64_t rows = batch.rows();
      const uint32_t seed = static_cast<uint32_t>(rows);
      const std::vector<float> xv = Random(static_cast<size_t>(rows * cd), seed);
      const std::vector<float> bv = Random(static_cast<size_t>(rows * nv), seed + 1);
      const std::vector<float> av = Random(static_cast<size_t>(rows * nv), seed + 2);
      std::vector<std::vector<float>> convs, outs;
      for (const Side& s : sides) {
        Backend& b = *s.be;
        const Tensor x = Upload(b, xv, rows, cd, plan);
        const Tensor bt = Upload(b, bv, rows, nv, plan);
        const Tensor at = Upload(b, av, rows, nv, plan);
        auto out = b.Alloc(rows, nv * g.dv);
        ASSERT_TRUE(out.ok());
        b.DeltaNetConv(s.states, s.dn, x, s.conv);
        convs.push_back(Fetch(b, x));
        b.DeltaNetRule(s.states, s.dn, x, bt, at, s.ssm_a, s.dt_bias, *out);
        outs.push_back(Fetch(b, *out));
        for (const Tensor& t : {x, bt, at, *out}) b.Free(t);
      }
      for (size_t i = 0; i < 2; ++i) {
        const std::vector<float>& ref = i == 0 ? convs[0] : outs[0];
        const std::vector<float>& got = i == 0 ? convs[1] : outs[1];
        const std::vector<double> ref64(ref.begin(), ref.end());
        const double err = NormalizedError(got.data(), ref64.data(), ref64.size());
        EXPECT_LT(err, i == 0 ? 1e-5 : 1e-4) << (i == 0 ? "convolution" : "delta rule") << ", rows " << rows;
        RecordProperty(fmt::format("{}_k{}_v{}_rows{}_error", i == 0 ? "conv" : "rule", g.dk, g.dv, rows),
                       fmt::format("{:.3g}", err));
      }
    }
  }
}

// The convolution's prompt kernel (a sequence's rows spread over a block) against the one that walks
// each channel's rows in one thread (FAK_CUDA_CONV_SERIAL=1), bit for bit: batches of prompts whose
// lengths end inside a run and a pass (several passes, a sequence shorter than the window), then one
// decode row each (the serial kernel reading the windows the prompt kernel left), and the windows.
TEST(CudaOps, DeltaNetConvPromptKernelMatchesTheSerialOneBitForBit) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  DeltaNetSpec spec;
  spec.n_k_head = 2;
  spec.n_v_head = 4;
  spec.k_dim = 128;
  spec.v_dim = 128;
  spec.conv_kernel = 4;
  spec.state_offset = 256;
  const int64_t cd = spec.conv_dim();
  const std::vector<float> conv = Random(static_cast<size_t>(cd * spec.conv_kernel), 3, 0.5f);
  const std::vector<std::vector<int64_t>> batches = {{300, 1, 129}, {2, 140, 7}, {1, 1, 1}, {64, 33, 31}};
  std::vector<std::vector<float>> got[2];
  for (int serial = 0; serial < 2; ++serial) {
    const ScopedEnv env("FAK_CUDA_CONV_SERIAL", serial ? "1" : "");
    Backend& b = *be.gpu;
    auto dn = b.BindDeltaNet(spec);
    ASSERT_TRUE(dn.ok()) << dn.status().ToString();
    auto st = b.CreateStates(spec.state_offset + spec.StateBytes(), 3);
    ASSERT_TRUE(st.ok());
    auto w = b.BindVector({GgmlType::kF32, cd, spec.conv_kernel, static_cast<size_t>(spec.conv_kernel) * 4,
                           reinterpret_cast<const uint8_t*>(conv.data()), false});
    ASSERT_TRUE(w.ok());
    const std::vector<int32_t> slots = {1, 2, 0};
    std::vector<int32_t> next_pos(3, 0);
    for (const std::vector<int64_t>& lengths : batches) {
      const SlotBatch batch(lengths, slots, &next_pos);
      const BatchPlan plan = batch.plan();
      const int64_t rows = batch.rows();
      const Tensor x =
          Upload(b, Random(static_cast<size_t>(rows * cd), static_cast<uint32_t>(rows)), rows, cd, plan);
      b.DeltaNetConv(*st, *dn, x, *w);
      got[serial].push_back(Fetch(b, x));
      b.Free(x);
    }
    // The windows, through one more row each from zeros: the output is the window's weighted sum.
    const SlotBatch batch({1, 1, 1}, slots, &next_pos);
    const Tensor x = Upload(b, std::vector<float>(static_cast<size_t>(3 * cd), 0.0f), 3, cd, batch.plan());
    b.DeltaNetConv(*st, *dn, x, *w);
    got[serial].push_back(Fetch(b, x));
    b.Free(x);
    ASSERT_TRUE(b.Synchronize().ok());
  }
  ASSERT_EQ(got[0].size(), got[1].size());
  for (size_t i = 0; i < got[0].size(); ++i) {
    ASSERT_EQ(got[0][i].size(), got[1][i].size());
    EXPECT_EQ(0, std::memcmp(got[0][i].data(), got[1][i].data(), got[0][i].size() * sizeof(float)))
        << "batch " << i;
  }
}

}  // namespace
}  // namespace fak::cuda_test
