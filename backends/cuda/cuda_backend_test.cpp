// The CUDA backend's ops against the CPU backend and float64 references: every op on both backends
// compared by normalized error (the consistency harness), the device weight layouts against the GGUF
// dequantization, downloads, and batch invariance of the matrix and attention kernels. Whole models are
// in cuda_model_test.cpp. On a machine without a GPU each test says "skipped: no GPU".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <tuple>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_test_util.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/weights.h"
#include "quant/codec.h"

namespace fak::cuda_test {
namespace {

// How a batch's rows are cut into the tensor-core attention's groups (host code: runs without a GPU).
// A group is a run of consecutive rows of one sequence, at most kAttnGroupRows long, whose contexts
// share one chunk length; each carries its sequence's first position in the batch.
TEST(CudaHost, AttentionGroupsFollowSequencesChunkLengthsAndTheCap) {
  using Groups = std::vector<int32_t>;
  // Two decode rows of sequences 0 and 1, then a 20-row prompt chunk of sequence 2.
  std::vector<int32_t> pos = {40, 7}, seq = {0, 1};
  for (int32_t p = 100; p < 120; ++p) pos.push_back(p), seq.push_back(2);
  Groups g;
  EXPECT_EQ(cuda::AttnGroups(pos.data(), seq.data(), std::ssize(pos), 3, &g), cuda::kAttnGroupRows);
  EXPECT_EQ(g, (Groups{0, 1, 40, 1, 1, 7, 2, 16, 100, 18, 4, 100}));
  // A sequence's rows apart in the batch: separate groups, each with the sequence's first position.
  pos = {9, 3, 10}, seq = {1, 0, 1};
  g.clear();
  EXPECT_EQ(cuda::AttnGroups(pos.data(), seq.data(), 3, 2, &g), 1);
  EXPECT_EQ(g, (Groups{0, 1, 9, 1, 1, 3, 2, 1, 9}));
  // Contexts whose chunk length differs (4,096 positions: 256; 4,097: 384) start a new group.
  static_assert(cuda::AttnChunkLen(4096) != cuda::AttnChunkLen(4097));
  pos = {4093, 4094, 4095, 4096, 4097}, seq = {0, 0, 0, 0, 0};
  g.clear();
  EXPECT_EQ(cuda::AttnGroups(pos.data(), seq.data(), 5, 1, &g), 3);
  EXPECT_EQ(g, (Groups{0, 3, 4093, 3, 2, 4093}));
  // No rows: no groups.
  g.clear();
  EXPECT_EQ(cuda::AttnGroups(pos.data(), seq.data(), 0, 1, &g), 0);
  EXPECT_TRUE(g.empty());
}

// The grid's chunk count covers every row of a batch: the most chunks of any context up to the
// longest (a row at 4,096 positions has 16 chunks, one at 4,097 only 11).
TEST(CudaHost, AttentionGridHasEveryShorterRowsChunks) {
  int64_t most = 0;
  for (int64_t ctx = 1; ctx <= 70000; ++ctx) {
    most = std::max(most, cuda::AttnChunks(ctx));
    ASSERT_EQ(cuda::AttnGridChunks(ctx), most) << "context " << ctx;
  }
  EXPECT_GT(cuda::AttnChunks(4096), cuda::AttnChunks(4097));
}

TEST(CudaWeights, DeviceLayoutsMeanWhatTheGgufRowsMean) {
  for (GgmlType t :
       {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32}) {
    SCOPED_TRACE(GgmlTypeName(t));
    const TestMatrix m = MakeMatrix(t, 3, 512, 7);
    auto h = cuda::RepackForDevice(m.weight());
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    auto back = cuda::DequantizeDeviceLayout(*h, m.rows, m.cols);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, m.deq);  // bit for bit
  }
  TestMatrix odd = MakeMatrix(GgmlType::kF16, 2, 36, 1);
  odd.cols = 36;
  EXPECT_FALSE(cuda::RepackForDevice(odd.weight()).ok());  // rows not a whole number of 16-byte loads
}

// MatMul for every weight format and several batch sizes, against float64 over the dequantized
// weights; the CPU backend's error is printed beside. Tolerances: f32/f16/bf16 weights with f32
// activations 1e-5; int8 activations (quantized formats) 1.5e-2.
TEST(CudaOps, MatMulEveryFormatMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  const int64_t rows = 200, cols = 1024;
  for (GgmlType t :
       {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32}) {
    const TestMatrix m = MakeMatrix(t, rows, cols, 11);
    auto wg = be.gpu->BindMatrix(m.weight());
    ASSERT_TRUE(wg.ok()) << wg.status().ToString();
    for (int64_t n : {1, 3, 8, 19, 100}) {
      SCOPED_TRACE(std::string(GgmlTypeName(t)) + " n=" + std::to_string(n));
      const OneSeq seq(n, 16);
      const std::vector<float> xv = Random(static_cast<size_t>(n * cols), 100 + static_cast<uint32_t>(n));
      const Tensor x = Upload(*be.gpu, xv, n, cols, seq.plan());
      auto y = be.gpu->Alloc(n, rows);
      ASSERT_TRUE(y.ok());
      be.gpu->MatMul(*wg, x, *y);
      const std::vector<float> got = Fetch(*be.gpu, *y);
      std::vector<double> ref(static_cast<size_t>(n * rows));
      for (int64_t r = 0; r < n; ++r)
        for (int64_t o = 0; o < rows; ++o) {
          double acc = 0;
          for (int64_t k = 0; k < cols; ++k)
            acc += double(xv[static_cast<size_t>(r * cols + k)]) * m.deq[static_cast<size_t>(o * cols + k)];
          ref[static_cast<size_t>(r * rows + o)] = acc;
        }
      const double err = NormalizedError(got.data(), ref.data(), ref.size());
      const bool q8 = t == GgmlType::kQ8_0 || t == GgmlType::kQ4_K || t == GgmlType::kQ6_K;
      EXPECT_LT(err, q8 ? 1.5e-2 : 1e-5);
      RecordProperty(std::string(GgmlTypeName(t)) + "_n" + std::to_string(n) + "_error",
                     fmt::format("{:.3g}", err));
      be.gpu->Free(x);
      be.gpu->Free(*y);
    }
  }
}

// The row-wise and element-wise ops and attention, on both backends, against float64.
TEST(CudaOps, NormRopeSwiGluAttentionMatchTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  const int64_t n = 21, hd = 64, n_head = 8, n_kv = 2, d = n_head * hd, pt = 16;
  const OneSeq seq(n, pt);
  const std::vector<float> xv = Random(static_cast<size_t>(n * d), 5);
  const std::vector<float> kv_k = Random(static_cast<size_t>(n * n_kv * hd), 6),
                           kv_v = Random(static_cast<size_t>(n * n_kv * hd), 8);
  std::vector<float> wv = Random(static_cast<size_t>(d), 9, 0.3f);
  Weight wn{GgmlType::kF32, 1, d, static_cast<size_t>(d) * 4, reinterpret_cast<const uint8_t*>(wv.data()),
            false};
  RopeSpec rope;
  for (int64_t i = 0; i < hd / 2; ++i)
    rope.inv_freq.push_back(static_cast<float>(std::pow(10000.0, -2.0 * i / hd)));

  std::vector<std::vector<float>> out[2];
  Backend* bes[2] = {be.cpu.get(), be.gpu.get()};
  for (int k = 0; k < 2; ++k) {
    Backend& b = *bes[k];
    auto w = b.BindVector(wn);
    auto r = b.BindRope(rope);
    ASSERT_TRUE(w.ok() && r.ok());
    const Tensor x = Upload(b, xv, n, d, seq.plan()), g = Upload(b, xv, n, d, seq.plan());
    const Tensor kt = Upload(b, kv_k, n, n_kv * hd, seq.plan()),
                 vt = Upload(b, kv_v, n, n_kv * hd, seq.plan());
    auto y = b.Alloc(n, d), att = b.Alloc(n, d);
    auto kv = b.CreateKv({.n_layer = 2, .n_kv_head = n_kv, .head_dim = hd, .page_tokens = pt}, 8);
    ASSERT_TRUE(y.ok() && att.ok() && kv.ok());
    ASSERT_TRUE(b.GrowKv(*kv, static_cast<int64_t>(seq.pages.size())).ok());
    b.SetBatch(seq.plan());
    b.RmsNorm(x, *w, *y, 1e-6f);
    out[k].push_back(Fetch(b, *y));
    b.Rope(x, hd, *r);
    out[k].push_back(Fetch(b, x));
    b.SiluMul(g, *y);
    out[k].push_back(Fetch(b, g));
    b.KvWrite(*kv, 1, kt, vt);
    b.Attention(*kv, 1, x, 0.125f, *att);
    out[k].push_back(Fetch(b, *att));
    b.Add(*att, x);
    out[k].push_back(Fetch(b, *att));
  }
  const char* names[] = {"RmsNorm", "Rope", "SiluMul", "Attention", "Add"};
  for (size_t i = 0; i < out[0].size(); ++i) {
    std::vector<double> ref(out[0][i].begin(), out[0][i].end());
    const double err = NormalizedError(out[1][i].data(), ref.data(), ref.size());
    // The CPU backend keeps f16 keys and values too; its own float order differs from the GPU's. The
    // tensor cores take the queries and the probabilities in f16 (as llama.cpp's flash attention does),
    // which costs attention (and what adds it) about 2^-12 of relative error.
    const bool f16_inputs = std::string(names[i]) == "Attention" || std::string(names[i]) == "Add";
    EXPECT_LT(err, f16_inputs ? 1e-3 : 2e-6) << names[i];
    RecordProperty(std::string(names[i]) + "_error", fmt::format("{:.3g}", err));
  }
}

// Attention (layer 0, scale 0.088) of one query row q at `position` of the sequence whose pages `seq`
// holds, as a batch of that row alone; empty when the output could not be allocated.
std::vector<float> AttendAlone(Backend& b, int32_t kv, const OneSeq& seq, int32_t position,
                               const std::vector<float>& q) {
  OneSeq one(1, 1);  // one row, over seq's page table
  one.positions = {position};
  one.pages = seq.pages;
  one.page_begin = seq.page_begin;
  const auto width = static_cast<int64_t>(q.size());
  const Tensor q1 = Upload(b, q, 1, width, one.plan());
  auto o1 = b.Alloc(1, width);
  if (!o1.ok()) return {};
  b.SetBatch(one.plan());
  b.Attention(kv, 0, q1, 0.088f, *o1);
  std::vector<float> got = Fetch(b, *o1);
  b.Free(q1);
  b.Free(*o1);
  return got;
}

// Attention of a row alone (a decode row: one group of one row, its first tile copied before the
// previous kernel ends) and inside a prompt of 1,300 rows (groups of 16 rows, keys and values staged once
// for all their query heads, contexts of up to six chunks): the same bits, for head sizes 64 and 128 and
// groups of 6, 4 and 7 query heads per KV head; and with f32 caches (the f32 kernels).
TEST(CudaOps, AttentionRowsAreBitIdenticalAloneAndInABatch) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  const int64_t n = 1300, pt = 16;  // contexts past 256 positions are split into chunks (kernels.h)
  for (const auto& [hd, n_head, n_kv, f32] : {std::tuple<int64_t, int64_t, int64_t, bool>{128, 12, 2, false},
                                              {64, 8, 2, false},
                                              {128, 28, 4, false},
                                              {128, 12, 2, true}}) {
    SCOPED_TRACE("head_dim " + std::to_string(hd) + ", " + std::to_string(n_head) + " heads" +
                 (f32 ? ", f32 cache" : ""));
    Backend& b = *be.gpu;
    const OneSeq seq(n, pt);
    const Tensor q = Upload(b, Random(static_cast<size_t>(n * n_head * hd), 21), n, n_head * hd, seq.plan());
    const Tensor kt = Upload(b, Random(static_cast<size_t>(n * n_kv * hd), 22), n, n_kv * hd, seq.plan());
    const Tensor vt = Upload(b, Random(static_cast<size_t>(n * n_kv * hd), 23), n, n_kv * hd, seq.plan());
    auto kv =
        b.CreateKv({.n_layer = 1, .n_kv_head = n_kv, .head_dim = hd, .page_tokens = pt, .f32 = f32}, 96);
    ASSERT_TRUE(kv.ok());
    ASSERT_TRUE(b.GrowKv(*kv, static_cast<int64_t>(seq.pages.size())).ok());
    b.SetBatch(seq.plan());
    b.KvWrite(*kv, 0, kt, vt);
    auto all = b.Alloc(n, n_head * hd);
    ASSERT_TRUE(all.ok());
    b.Attention(*kv, 0, q, 0.088f, *all);
    const std::vector<float> batch = Fetch(b, *all);
    const std::vector<float> qv = Fetch(b, q);
    for (int64_t r : {int64_t{0}, int64_t{17}, int64_t{139}, int64_t{299}, int64_t{511}, int64_t{512},
                      int64_t{777}, int64_t{1299}}) {
      const std::vector<float> qr(qv.begin() + r * n_head * hd, qv.begin() + (r + 1) * n_head * hd);
      const std::vector<float> got = AttendAlone(b, *kv, seq, static_cast<int32_t>(r), qr);
      ASSERT_EQ(std::ssize(got), n_head * hd);
      EXPECT_EQ(std::memcmp(got.data(), &batch[static_cast<size_t>(r * n_head * hd)], got.size() * 4), 0)
          << "row " << r;
    }
    b.Free(q);
    b.Free(kt);
    b.Free(vt);
    b.Free(*all);
  }
}

// Attention over contexts of several chunks (up to 1,400 positions, six chunks of 256) against the CPU
// backend: the tensor cores' f16 queries and probabilities (see above) and the f32 kernels.
TEST(CudaOps, AttentionOverLongContextsMatchesTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  const int64_t n = 1400, pt = 16, hd = 128, n_head = 12, n_kv = 2;
  const OneSeq seq(n, pt);
  const std::vector<float> qv = Random(static_cast<size_t>(n * n_head * hd), 31),
                           kv_k = Random(static_cast<size_t>(n * n_kv * hd), 32),
                           kv_v = Random(static_cast<size_t>(n * n_kv * hd), 33);
  for (const bool f32 : {false, true}) {
    SCOPED_TRACE(f32 ? "f32 cache" : "f16 cache");
    std::vector<float> out[2];
    Backend* bes[2] = {be.cpu.get(), be.gpu.get()};
    for (int k = 0; k < 2; ++k) {
      Backend& b = *bes[k];
      const Tensor q = Upload(b, qv, n, n_head * hd, seq.plan());
      const Tensor kt = Upload(b, kv_k, n, n_kv * hd, seq.plan()),
                   vt = Upload(b, kv_v, n, n_kv * hd, seq.plan());
      auto kv =
          b.CreateKv({.n_layer = 1, .n_kv_head = n_kv, .head_dim = hd, .page_tokens = pt, .f32 = f32}, 96);
      auto att = b.Alloc(n, n_head * hd);
      ASSERT_TRUE(kv.ok() && att.ok());
      ASSERT_TRUE(b.GrowKv(*kv, static_cast<int64_t>(seq.pages.size())).ok());
      b.SetBatch(seq.plan());
      b.KvWrite(*kv, 0, kt, vt);
      b.Attention(*kv, 0, q, 0.088f, *att);
      out[k] = Fetch(b, *att);
    }
    std::vector<double> ref(out[0].begin(), out[0].end());
    const double err = NormalizedError(out[1].data(), ref.data(), ref.size());
    EXPECT_LT(err, f32 ? 2e-6 : 1e-3);
    RecordProperty(f32 ? "attention_error_f32_cache" : "attention_error", fmt::format("{:.3g}", err));
  }
}

// Rows whose chunks differ in length inside one batch (contexts 4,095, 4,096 and 4,097: chunks of 256,
// 256 and 384 positions, 16, 16 and 11 of them), three sequences over one cache: each row the same bits
// as alone.
TEST(CudaOps, AttentionRowsOfDifferentChunkLengthsShareABatch) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  const int64_t n = 4097, pt = 16, hd = 128, n_head = 12, n_kv = 2, width = n_head * hd;
  Backend& b = *be.gpu;
  const OneSeq seq(n, pt);
  const Tensor kt = Upload(b, Random(static_cast<size_t>(n * n_kv * hd), 41), n, n_kv * hd, seq.plan());
  const Tensor vt = Upload(b, Random(static_cast<size_t>(n * n_kv * hd), 42), n, n_kv * hd, seq.plan());
  auto kv = b.CreateKv({.n_layer = 1, .n_kv_head = n_kv, .head_dim = hd, .page_tokens = pt}, 300);
  ASSERT_TRUE(kv.ok());
  ASSERT_TRUE(b.GrowKv(*kv, static_cast<int64_t>(seq.pages.size())).ok());
  b.SetBatch(seq.plan());
  b.KvWrite(*kv, 0, kt, vt);
  ASSERT_TRUE(b.Synchronize().ok());
  const int32_t positions[] = {4095, 4094, 4096};  // the longest last; the first has the most chunks
  const std::vector<float> qv = Random(static_cast<size_t>(3 * width), 43);
  // The batch first, so no partials of the rows alone are left where its rows' would be.
  OneSeq three(3, pt);
  three.positions.assign(std::begin(positions), std::end(positions));
  three.row_seq = {0, 1, 2};
  three.pages.clear();
  three.page_begin = {0};
  for (int s = 0; s < 3; ++s) {
    three.pages.insert(three.pages.end(), seq.pages.begin(), seq.pages.end());
    three.page_begin.push_back(static_cast<int32_t>(three.pages.size()));
  }
  const Tensor q3 = Upload(b, qv, 3, width, three.plan());
  auto o3 = b.Alloc(3, width);
  ASSERT_TRUE(o3.ok());
  b.SetBatch(three.plan());
  b.Attention(*kv, 0, q3, 0.088f, *o3);
  const std::vector<float> batch = Fetch(b, *o3);
  for (int r = 0; r < 3; ++r) {
    const std::vector<float> qr(qv.begin() + r * width, qv.begin() + (r + 1) * width);
    const std::vector<float> got = AttendAlone(b, *kv, seq, positions[r], qr);
    ASSERT_EQ(std::ssize(got), width);
    EXPECT_EQ(std::memcmp(got.data(), &batch[static_cast<size_t>(r * width)], got.size() * 4), 0)
        << "position " << positions[r];
  }
  b.Free(q3);
  b.Free(*o3);
  b.Free(kt);
  b.Free(vt);
}

TEST(CudaOps, CheckFiniteFindsNaNAndInfinityAnywhere) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  const int64_t rows = 9, cols = 10007;
  const OneSeq seq(rows, 16);
  std::vector<float> v(static_cast<size_t>(rows * cols), 0.25f);
  auto check = [&](int64_t first, int64_t n) {
    const Tensor t = Upload(*be.gpu, v, rows, cols, seq.plan());
    bool finite = false;
    be.gpu->CheckFinite(t.Rows(first, n), &finite);
    EXPECT_TRUE(be.gpu->Synchronize().ok());
    be.gpu->Free(t);
    return finite;
  };
  EXPECT_TRUE(check(0, rows));
  for (const int64_t row : {int64_t{0}, int64_t{4}, rows - 1}) {
    for (const int64_t col : {int64_t{0}, int64_t{1}, cols / 2, cols - 1}) {
      for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
        v[static_cast<size_t>(row * cols + col)] = bad;
        SCOPED_TRACE("row " + std::to_string(row) + " col " + std::to_string(col));
        EXPECT_FALSE(check(0, rows));
        EXPECT_FALSE(check(row, 1));
        if (row > 0) {
          EXPECT_TRUE(check(0, row));
        }
        if (row + 1 < rows) {
          EXPECT_TRUE(check(row + 1, rows - row - 1));
        }
        v[static_cast<size_t>(row * cols + col)] = 0.25f;
      }
    }
  }
}

// A batched step's logits (tens of MB) are copied out of the pinned area by several threads in pieces,
// or land directly in memory the caller registered (PinHost): every value arrives, in place.
TEST(CudaOps, LargeDownloadsArriveWholeAndInPlace) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  for (const int64_t rows : {int64_t{14}, int64_t{40}}) {
    const int64_t cols = 151936;
    SCOPED_TRACE(rows);
    const OneSeq seq(rows, 16);
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 1000003) * 0.5f;
    const Tensor t = Upload(*be.gpu, v, rows, cols, seq.plan());
    // Through the staging area twice (the second reuses it), then straight into registered memory,
    // twice: the buffer is unregistered and registered again between the two (a graph that copied into
    // the first registration must not run for the second).
    std::vector<float> got(v.size());
    for (int pass = 0; pass < 4; ++pass) {
      std::fill(got.begin(), got.end(), -1.0f);
      const bool pinned = pass >= 2 && be.gpu->PinHost(got.data(), got.size() * sizeof(float));
      EXPECT_EQ(pinned, pass >= 2);
      const OneSeq step(rows, 16);
      be.gpu->SetBatch(step.plan());
      be.gpu->Download(t, got.data());
      ASSERT_TRUE(be.gpu->Synchronize().ok());
      if (pinned) be.gpu->UnpinHost(got.data());
      size_t wrong = 0;
      for (size_t i = 0; i < v.size(); ++i) wrong += got[i] != v[i];
      EXPECT_EQ(wrong, 0u);
    }
    be.gpu->Free(t);
  }
}

// Rows [first, first + count) of xv (rows of `cols` values) times w, which has `rows` rows, on `be`.
std::vector<float> MatMulRows(Backend& be, BoundWeight w, const std::vector<float>& xv, int64_t first,
                              int64_t count, int64_t rows, int64_t cols) {
  const OneSeq seq(count, 16);
  const Tensor x =
      Upload(be, std::vector<float>(xv.begin() + first * cols, xv.begin() + (first + count) * cols), count,
             cols, seq.plan());
  auto y = be.Alloc(count, rows);
  EXPECT_TRUE(y.ok());
  be.MatMul(w, x, *y);
  std::vector<float> got = Fetch(be, *y);
  be.Free(x);
  be.Free(*y);
  return got;
}

TEST(CudaOps, MatMulRowsAreBitIdenticalAloneAndInABatch) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  const int64_t rows = 200, n_max = 150;
  const struct {
    GgmlType type;
    int64_t cols;
  } cases[] = {{GgmlType::kQ8_0, 256},
               {GgmlType::kQ8_0, 896},
               {GgmlType::kQ8_0, 2048},
               {GgmlType::kQ8_0, 4608},
               {GgmlType::kQ4_K, 2048},
               {GgmlType::kQ4_K, 4608},
               {GgmlType::kQ6_K, 1536},
               {GgmlType::kQ6_K, 4608},
               {GgmlType::kBF16, 2048},
               // Four pieces with a partial last segment; four rounds per piece.
               {GgmlType::kQ8_0, 4128},
               {GgmlType::kQ4_K, 16384}};
  // Both forms of the one-row product: warps on whole rows (matvec_rows.cu; rows of four pieces by one,
  // two or four warps each) and four warps per long row (matvec.cu); batches of 16 rows or more by the
  // GEMM with four or eight warps a tile (gemm.cu).
  const struct {
    const char* rows_kernel;
    const char* split;
    const char* gemm_warps;
  } forms[] = {{"1", "1", "4"}, {"1", "2", "4"}, {"1", "4", "4"}, {"0", "", "4"}, {"1", "", "8"}};
  for (const auto& form : forms)
    for (const auto& c : cases) {
      const ScopedEnv rows_env("FAK_CUDA_MATVEC_ROWS", form.rows_kernel),
          split_env("FAK_CUDA_MATVEC_SPLIT", form.split), gemm_env("FAK_CUDA_GEMM_WARPS", form.gemm_warps);
      SCOPED_TRACE(std::string(GgmlTypeName(c.type)) + " cols=" + std::to_string(c.cols) + " rows kernel " +
                   form.rows_kernel + ", warps per row " + form.split + ", GEMM warps " + form.gemm_warps);
      const TestMatrix m = MakeMatrix(c.type, rows, c.cols, 3);
      auto w = be.gpu->BindMatrix(m.weight());
      ASSERT_TRUE(w.ok());
      const std::vector<float> xv = Random(static_cast<size_t>(n_max * c.cols), 4);
      auto run = [&](int64_t first, int64_t n) {
        return MatMulRows(*be.gpu, *w, xv, first, n, rows, c.cols);
      };
      std::vector<std::vector<float>> alone;
      for (int64_t r = 0; r < n_max; ++r) alone.push_back(run(r, 1));
      for (int64_t n : {int64_t{2}, int64_t{3}, int64_t{5}, int64_t{8}, int64_t{16}, int64_t{24}, int64_t{33},
                        int64_t{64}, n_max}) {
        const std::vector<float> got = run(0, n);
        int64_t differ = 0;
        for (int64_t r = 0; r < n; ++r) {
          differ += std::memcmp(&got[static_cast<size_t>(r * rows)], alone[static_cast<size_t>(r)].data(),
                                static_cast<size_t>(rows) * 4) != 0;
        }
        EXPECT_EQ(differ, 0) << differ << " of " << n << " rows differ from the same row alone";
      }
    }
}

// A matrix with rows enough that the small-batch GEMM gives each warp several segments (fewer warps per
// block on a full grid): rows of a 32-row batch are still the bits of the same rows alone.
TEST(CudaOps, LargeMatrixRowsAreBitIdenticalAloneAndInABatch) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  const int64_t n = 32;
  // Rows enough that each warp of the whole-row kernel (matvec_rows.cu) takes several, one warp a row:
  // Q8_0 one round a row, Q4_K three (the last partial), Q6_K two.
  const struct {
    GgmlType type;
    int64_t rows, cols;
  } cases[] = {{GgmlType::kQ8_0, 8448, 1536}, {GgmlType::kQ4_K, 8448, 4608}, {GgmlType::kQ6_K, 4352, 2304}};
  for (const auto& c : cases) {
    const TestMatrix m = MakeMatrix(c.type, c.rows, c.cols, 5);
    auto w = be.gpu->BindMatrix(m.weight());
    ASSERT_TRUE(w.ok());
    const std::vector<float> xv = Random(static_cast<size_t>(n * c.cols), 6);
    auto run = [&](int64_t first, int64_t count) {
      return MatMulRows(*be.gpu, *w, xv, first, count, c.rows, c.cols);
    };
    SCOPED_TRACE(std::string(GgmlTypeName(c.type)) + " " + std::to_string(c.rows) + "x" +
                 std::to_string(c.cols));
    for (const int64_t batch : {int64_t{8}, int64_t{16}, n}) {
      const std::vector<float> all = run(0, batch);
      int64_t differ = 0;
      for (int64_t r = 0; r < batch; ++r) {
        differ += std::memcmp(&all[static_cast<size_t>(r * c.rows)], run(r, 1).data(),
                              static_cast<size_t>(c.rows) * 4) != 0;
      }
      EXPECT_EQ(differ, 0) << differ << " of " << batch << " rows differ from the same row alone";
    }
  }
}

TEST(CudaBackend, BadRequestsGetClearErrors) {
  SKIP_WITHOUT_GPU();
  auto be = cuda::CreateCudaBackend({.device = 999});
  ASSERT_FALSE(be.ok());
  EXPECT_NE(be.status().message().find("device 999"), std::string::npos);
  auto g = cuda::CreateCudaBackend();
  ASSERT_TRUE(g.ok());
  // An absurd allocation names the bytes asked for and the free memory.
  auto t = (*g)->Alloc(int64_t{1} << 20, int64_t{1} << 20);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("MiB free"), std::string::npos) << t.status().ToString();
  // A weight type without a kernel.
  std::vector<uint8_t> raw(18 * 2);
  Weight q4{GgmlType::kQ4_0, 1, 64, 36, raw.data(), false};
  auto b = (*g)->BindMatrix(q4);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("q4_0"), std::string::npos) << b.status().ToString();
  // Gated-DeltaNet heads the recurrence kernel does not take (wider than 128, not a multiple of 4).
  for (const int64_t dk : {int64_t{132}, int64_t{6}}) {
    DeltaNetSpec d;
    d.n_k_head = 2;
    d.n_v_head = 4;
    d.k_dim = dk;
    d.v_dim = 8;
    d.conv_kernel = 4;
    auto dn = (*g)->BindDeltaNet(d);
    ASSERT_FALSE(dn.ok());
    EXPECT_NE(dn.status().message().find("key heads to 128"), std::string::npos) << dn.status().ToString();
  }
}

}  // namespace
}  // namespace fak::cuda_test
