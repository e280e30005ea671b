// The CUDA backend against the CPU backend and HuggingFace transformers: every op on both backends
// compared by normalized error against a float64 reference (the consistency harness), the device
// weight layouts against the GGUF dequantization, batch invariance on the GPU, and whole models on
// the HF oracle fixtures. On a machine without a GPU each test says "skipped: no GPU".
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <tuple>

#include <nlohmann/json.hpp>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_info.h"
#include "backends/cuda/weights.h"
#include "engine/model.h"
#include "engine/runtime.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "quant/codec.h"

namespace fak {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (cuda::ListDevices().empty()) GTEST_SKIP() << "skipped: no GPU"

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// ||a - b|| / ||b||.
double NormalizedError(const float* a, const double* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// A matrix of `type` made from random f32 values, as GGUF rows.
struct TestMatrix {
  GgmlType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // what the bytes mean
  Weight weight() const {
    return {type, rows, cols, bytes.size() / static_cast<size_t>(rows), bytes.data(), false};
  }
};

TestMatrix MakeMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  TestMatrix m{type, rows, cols, {}, {}};
  const size_t row_bytes = *GgmlRowBytes(type, static_cast<uint64_t>(cols));
  m.bytes.resize(row_bytes * static_cast<size_t>(rows));
  m.deq.resize(static_cast<size_t>(rows * cols));
  const std::vector<float> src = Random(static_cast<size_t>(rows * cols), seed, 0.05f);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(QuantizeRow(type, &src[static_cast<size_t>(r * cols)],
                            &m.bytes[static_cast<size_t>(r) * row_bytes], cols)
                    .ok());
    EXPECT_TRUE(DequantizeRow(type, &m.bytes[static_cast<size_t>(r) * row_bytes],
                              &m.deq[static_cast<size_t>(r * cols)], cols)
                    .ok());
  }
  return m;
}

// The two backends side by side on the same inputs.
struct Pair {
  std::unique_ptr<Backend> cpu = cpu::CreateCpuBackend({.threads = 2});
  std::unique_ptr<Backend> gpu;
  Pair() {
    auto g = cuda::CreateCudaBackend();
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    if (g.ok()) gpu = std::move(*g);
  }
};

// Uploads host values into a new tensor of `be`.
Tensor Upload(Backend& be, const std::vector<float>& v, int64_t rows, int64_t cols, const BatchPlan& plan) {
  auto t = be.Alloc(rows, cols);
  EXPECT_TRUE(t.ok());
  // There is no upload call in the seam: an f32 embedding table carries the values in.
  static std::vector<std::vector<float>> keep;
  keep.push_back(v);
  Weight table{GgmlType::kF32,
               rows * cols / cols,
               cols,
               static_cast<size_t>(cols) * 4,
               reinterpret_cast<const uint8_t*>(keep.back().data()),
               false};
  auto e = be.BindEmbedding(table, GgmlType::kF32);
  EXPECT_TRUE(e.ok());
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) ids[static_cast<size_t>(r)] = static_cast<int32_t>(r);
  BatchPlan p = plan;
  p.tokens = ids;
  be.SetBatch(p);
  be.Embed(*e, *t);
  EXPECT_TRUE(be.Synchronize().ok());
  return *t;
}

std::vector<float> Fetch(Backend& be, Tensor t) {
  std::vector<float> out(static_cast<size_t>(t.rows * t.cols));
  be.Download(t, out.data());
  const Status s = be.Synchronize();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// A plan of `rows` rows of one sequence at positions 0..rows-1 over pages 0..
struct OneSeq {
  std::vector<int32_t> tokens, positions, row_seq, page_begin, pages, out_rows;
  OneSeq(int64_t rows, int64_t page_tokens) {
    for (int64_t r = 0; r < rows; ++r) {
      tokens.push_back(0);
      positions.push_back(static_cast<int32_t>(r));
      row_seq.push_back(0);
      out_rows.push_back(static_cast<int32_t>(r));
    }
    for (int64_t p = 0; p * page_tokens < rows; ++p) pages.push_back(static_cast<int32_t>(p));
    page_begin = {0, static_cast<int32_t>(pages.size())};
  }
  BatchPlan plan() const {
    return {tokens, positions, row_seq, page_begin, pages, out_rows, static_cast<int64_t>(tokens.size()), {}};
  }
};

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
    // The CPU backend keeps f16 keys and values too; its own float order differs from the GPU's.
    EXPECT_LT(err, 2e-6) << names[i];
    RecordProperty(std::string(names[i]) + "_error", fmt::format("{:.3g}", err));
  }
}

// Attention of a row alone (the per-head kernel) and inside a batch of 300 rows (keys and values staged
// in shared memory once per KV head, for the query heads of its group, three tiles of positions): the
// same bits, for head sizes 64 and 128 and groups of 6 and 4.
TEST(CudaOps, AttentionRowsAreBitIdenticalAloneAndInABatch) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  const int64_t n = 1300, pt = 16;  // contexts past 512 positions are split into chunks (kernels.h)
  for (const auto [hd, n_head, n_kv] : {std::tuple<int64_t, int64_t, int64_t>{128, 12, 2}, {64, 8, 2}}) {
    SCOPED_TRACE("head_dim " + std::to_string(hd) + ", " + std::to_string(n_head) + " heads");
    Backend& b = *be.gpu;
    const OneSeq seq(n, pt);
    const Tensor q = Upload(b, Random(static_cast<size_t>(n * n_head * hd), 21), n, n_head * hd, seq.plan());
    const Tensor kt = Upload(b, Random(static_cast<size_t>(n * n_kv * hd), 22), n, n_kv * hd, seq.plan());
    const Tensor vt = Upload(b, Random(static_cast<size_t>(n * n_kv * hd), 23), n, n_kv * hd, seq.plan());
    auto kv = b.CreateKv({.n_layer = 1, .n_kv_head = n_kv, .head_dim = hd, .page_tokens = pt}, 96);
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
      OneSeq one(1, pt);
      one.positions = {static_cast<int32_t>(r)};
      one.pages = seq.pages;
      one.page_begin = seq.page_begin;
      const std::vector<float> qr(qv.begin() + r * n_head * hd, qv.begin() + (r + 1) * n_head * hd);
      const Tensor q1 = Upload(b, qr, 1, n_head * hd, one.plan());
      auto o1 = b.Alloc(1, n_head * hd);
      ASSERT_TRUE(o1.ok());
      b.SetBatch(one.plan());
      b.Attention(*kv, 0, q1, 0.088f, *o1);
      const std::vector<float> got = Fetch(b, *o1);
      EXPECT_EQ(std::memcmp(got.data(), &batch[static_cast<size_t>(r * n_head * hd)], got.size() * 4), 0)
          << "row " << r;
      b.Free(q1);
      b.Free(*o1);
    }
    b.Free(q);
    b.Free(kt);
    b.Free(vt);
    b.Free(*all);
  }
}

// Attention over contexts of several chunks (up to 1,400 positions, three chunks of 512) against the CPU
// backend.
TEST(CudaOps, AttentionOverLongContextsMatchesTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  Pair be;
  ASSERT_TRUE(be.gpu);
  const int64_t n = 1400, pt = 16, hd = 128, n_head = 12, n_kv = 2;
  const OneSeq seq(n, pt);
  const std::vector<float> qv = Random(static_cast<size_t>(n * n_head * hd), 31),
                           kv_k = Random(static_cast<size_t>(n * n_kv * hd), 32),
                           kv_v = Random(static_cast<size_t>(n * n_kv * hd), 33);
  std::vector<float> out[2];
  Backend* bes[2] = {be.cpu.get(), be.gpu.get()};
  for (int k = 0; k < 2; ++k) {
    Backend& b = *bes[k];
    const Tensor q = Upload(b, qv, n, n_head * hd, seq.plan());
    const Tensor kt = Upload(b, kv_k, n, n_kv * hd, seq.plan()),
                 vt = Upload(b, kv_v, n, n_kv * hd, seq.plan());
    auto kv = b.CreateKv({.n_layer = 1, .n_kv_head = n_kv, .head_dim = hd, .page_tokens = pt}, 96);
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
  EXPECT_LT(err, 2e-6);
  RecordProperty("attention_error", fmt::format("{:.3g}", err));
}

// A row's MatMul result is the same bits alone and inside batches of any size: batches of 16 rows or
// more of the quantized formats run on the tensor-core GEMM, smaller ones on the matrix-vector kernel,
// and both sum in the same order. The shapes cover a partial last tile of weight rows and of activation
// rows, rows of 4096+ weights (four pieces), and a row length that ends inside a segment (896).
// The finiteness check reads the tensor where it is: a NaN or an infinity at its first or last value
// or in between is found, with the tensor starting at any float (not only 16-byte) boundary.
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
  } cases[] = {{GgmlType::kQ8_0, 256},  {GgmlType::kQ8_0, 896},  {GgmlType::kQ8_0, 2048},
               {GgmlType::kQ8_0, 4608}, {GgmlType::kQ4_K, 2048}, {GgmlType::kQ4_K, 4608},
               {GgmlType::kQ6_K, 1536}, {GgmlType::kQ6_K, 4608}, {GgmlType::kBF16, 2048}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(GgmlTypeName(c.type)) + " cols=" + std::to_string(c.cols));
    const TestMatrix m = MakeMatrix(c.type, rows, c.cols, 3);
    auto w = be.gpu->BindMatrix(m.weight());
    ASSERT_TRUE(w.ok());
    const std::vector<float> xv = Random(static_cast<size_t>(n_max * c.cols), 4);
    auto run = [&](int64_t first, int64_t n) { return MatMulRows(*be.gpu, *w, xv, first, n, rows, c.cols); };
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
  const int64_t rows = 8448, cols = 1536, n = 32;
  const TestMatrix m = MakeMatrix(GgmlType::kQ8_0, rows, cols, 5);
  auto w = be.gpu->BindMatrix(m.weight());
  ASSERT_TRUE(w.ok());
  const std::vector<float> xv = Random(static_cast<size_t>(n * cols), 6);
  auto run = [&](int64_t first, int64_t count) {
    return MatMulRows(*be.gpu, *w, xv, first, count, rows, cols);
  };
  for (const int64_t batch : {int64_t{8}, int64_t{16}, n}) {
    const std::vector<float> all = run(0, batch);
    int64_t differ = 0;
    for (int64_t r = 0; r < batch; ++r) {
      differ += std::memcmp(&all[static_cast<size_t>(r * rows)], run(r, 1).data(),
                            static_cast<size_t>(rows) * 4) != 0;
    }
    EXPECT_EQ(differ, 0) << differ << " of " << batch << " rows differ from the same row alone";
  }
}

Result<std::unique_ptr<Model>> LoadFor(const std::string& path, WeightQuant quant, bool gpu) {
  return LoadModel(path, LoadOptions{.quant = quant, .layout = gpu ? &cuda::CudaWeightLayout() : nullptr});
}

double Cosine(const float* a, const float* b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i)
    ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

// Whole models on the HF oracle fixtures: the CUDA path's logits at every prompt position against the
// CPU path's (cosine >= 0.9999), HF's argmax at every position, and HF's 16-token greedy continuation.
TEST(CudaModel, HfFixturesMatchTransformersAndTheCpuPath) {
  SKIP_WITHOUT_GPU();
  for (const char* name : {"llama3-tiny", "qwen2-tiny", "qwen3-tiny", "qwen2-256", "qwen35-tiny"}) {
    for (WeightQuant q : {WeightQuant::kKeep, WeightQuant::kF32}) {
      SCOPED_TRACE(std::string(name) + " " + WeightQuantName(q));
      const std::string dir = std::string("tests/fixtures/hf/") + name;
      std::ifstream in(dir + "/oracle.json");
      ASSERT_TRUE(in);
      const auto oracle = nlohmann::json::parse(in);
      auto mc = LoadFor(dir, q, false);
      auto mg = LoadFor(dir, q, true);
      ASSERT_TRUE(mc.ok() && mg.ok()) << mg.status().ToString();
      auto rc = Runtime::Create(**mc, RuntimeOptions{.backend = {.threads = 2}});
      auto rg = Runtime::Create(**mg, RuntimeOptions{.backend = {.name = "cuda"}});
      ASSERT_TRUE(rc.ok() && rg.ok()) << rg.status().ToString();
      auto sc = Session::Create(**rc);
      auto sg = Session::Create(**rg);
      ASSERT_TRUE(sc.ok() && sg.ok());
      const size_t vocab = static_cast<size_t>((*mc)->config.vocab_size);
      for (const auto& p : oracle["prompts"]) {
        const auto ids = p["token_ids"].get<std::vector<int32_t>>();
        std::vector<float> lc(ids.size() * vocab), lg(ids.size() * vocab);
        (*sc)->Truncate(0);
        (*sg)->Truncate(0);
        ASSERT_TRUE((*sc)->Prefill(ids, lc.data(), true).ok());
        const Status s = (*sg)->Prefill(ids, lg.data(), true);
        ASSERT_TRUE(s.ok()) << s.ToString();
        const auto argmax = p["argmax"].get<std::vector<int32_t>>();
        for (size_t t = 0; t < ids.size(); ++t) {
          EXPECT_GE(Cosine(&lg[t * vocab], &lc[t * vocab], vocab), 0.9999) << "position " << t;
          EXPECT_EQ(Argmax(std::span<const float>(&lg[t * vocab], vocab)), argmax[t]) << "position " << t;
        }
        const auto want = p["greedy"]["tokens"].get<std::vector<int32_t>>();
        std::vector<float> step(&lg[(ids.size() - 1) * vocab], &lg[ids.size() * vocab]);
        std::vector<int32_t> got;
        for (size_t i = 0; i < want.size(); ++i) {
          got.push_back(Argmax(step));
          ASSERT_TRUE((*sg)->Step(got.back(), step.data()).ok());
        }
        EXPECT_EQ(got, want);
      }
    }
  }
}

// Batch invariance on the GPU: a sequence's logits, decoded step by step alone, are bit-identical to
// the same sequence decoded inside a batch of 8 with other prompts, prefilled in other chunkings.
TEST(CudaModel, DecodeIsBitIdenticalAloneAndInABatchOfEight) {
  SKIP_WITHOUT_GPU();
  // llama.cpp's Q4_K_M mix (q4_k and q6_k matrices) as it is, and requantized to q8_0 at load.
  for (WeightQuant quant : {WeightQuant::kKeep, WeightQuant::kQ8_0}) {
    SCOPED_TRACE(WeightQuantName(quant));
    auto m = LoadFor("../shared/fixtures/llamacpp-tiny/tiny-llama-q4_k_m.gguf", quant, true);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto rt = Runtime::Create(
        **m, RuntimeOptions{.max_context = 128, .max_sequences = 8, .backend = {.name = "cuda"}});
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    const int64_t vocab = (*m)->config.vocab_size;
    std::mt19937 rng(42);
    std::vector<std::vector<int32_t>> prompts(8);
    for (size_t i = 0; i < prompts.size(); ++i) {
      prompts[i].resize(5 + 3 * i);
      for (auto& t : prompts[i]) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
    }
    const int steps = 12;
    // Alone: prefill in one pass, then greedy decode; every step's logits kept.
    std::vector<float> alone;
    std::vector<int32_t> alone_tokens;
    {
      auto s = Session::Create(**rt);
      ASSERT_TRUE(s.ok());
      std::vector<float> l(static_cast<size_t>(vocab));
      ASSERT_TRUE((*s)->Prefill(prompts[0], l.data()).ok());
      for (int k = 0; k < steps; ++k) {
        alone.insert(alone.end(), l.begin(), l.end());
        alone_tokens.push_back(Argmax(l));
        ASSERT_TRUE((*s)->Step(alone_tokens.back(), l.data()).ok());
      }
    }
    // In a batch of 8: every sequence's prompt in one forward (sequence 0's in chunks of 3 first),
    // then every step decodes all eight together.
    std::vector<std::unique_ptr<Sequence>> seqs;
    for (int i = 0; i < 8; ++i) {
      auto s = (*rt)->NewSequence();
      ASSERT_TRUE(s.ok());
      seqs.push_back(std::move(*s));
    }
    std::vector<std::vector<float>> logits(8, std::vector<float>(static_cast<size_t>(vocab)));
    for (size_t at = 0; at + 3 < prompts[0].size(); at += 3) {
      const std::vector<int32_t> chunk(prompts[0].begin() + static_cast<int64_t>(at),
                                       prompts[0].begin() + static_cast<int64_t>(at) + 3);
      const SeqWork w{.seq = seqs[0].get(), .tokens = chunk};
      ASSERT_TRUE((*rt)->Forward(std::span<const SeqWork>(&w, 1)).ok());
    }
    std::vector<SeqWork> work;
    const size_t done0 = seqs[0]->size();
    std::vector<std::vector<int32_t>> rest(8);
    for (int i = 0; i < 8; ++i) {
      rest[i].assign(prompts[i].begin() + static_cast<int64_t>(i == 0 ? done0 : 0), prompts[i].end());
      work.push_back({.seq = seqs[i].get(), .tokens = rest[i], .logits = logits[i].data()});
    }
    ASSERT_TRUE((*rt)->Forward(work).ok());
    std::vector<int32_t> next(8);
    for (int k = 0; k < steps; ++k) {
      EXPECT_EQ(std::memcmp(logits[0].data(), &alone[static_cast<size_t>(k * vocab)],
                            static_cast<size_t>(vocab) * 4),
                0)
          << "step " << k;
      work.clear();
      for (int i = 0; i < 8; ++i) {
        next[i] = i == 0 ? alone_tokens[static_cast<size_t>(k)] : Argmax(logits[i]);
        work.push_back({.seq = seqs[i].get(),
                        .tokens = std::span<const int32_t>(&next[i], 1),
                        .logits = logits[i].data()});
      }
      ASSERT_TRUE((*rt)->Forward(work).ok());
    }
  }
}

// Decode steps replayed from captured CUDA graphs give the bits of the same steps launched op by op
// (FAK_CUDA_GRAPHS=0), prefill and decode alike, with the fused bias and residual epilogues in both;
// and so do kernels launched in plain stream order (FAK_CUDA_PDL=0) instead of overlapping.
TEST(CudaModel, GraphReplayGivesTheBitsOfOpByOpLaunches) {
  SKIP_WITHOUT_GPU();
  for (const char* path :
       {"tests/fixtures/hf/qwen2-256", "../shared/fixtures/llamacpp-tiny/tiny-llama-q4_k_m.gguf"}) {
    SCOPED_TRACE(path);
    auto m = LoadFor(path, WeightQuant::kQ8_0, true);  // qwen2: q/k/v biases
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const int64_t vocab = (*m)->config.vocab_size;
    std::vector<int32_t> prompt = {1, 17, 300, 5, 99, 1023, 7, 42};
    for (auto& t : prompt) t %= static_cast<int32_t>(vocab);
    std::vector<std::vector<float>> runs;
    struct Mode {
      const char *graphs, *pdl;
    };
    for (const Mode mode : {Mode{"1", "1"}, Mode{"0", "1"}, Mode{"1", "0"}, Mode{"0", "0"}}) {
      setenv("FAK_CUDA_GRAPHS", mode.graphs, 1);
      setenv("FAK_CUDA_PDL", mode.pdl, 1);
      auto rt = Runtime::Create(**m, RuntimeOptions{.max_context = 64, .backend = {.name = "cuda"}});
      ASSERT_TRUE(rt.ok()) << rt.status().ToString();
      auto s = Session::Create(**rt);
      ASSERT_TRUE(s.ok());
      std::vector<float> all, l(static_cast<size_t>(vocab));
      ASSERT_TRUE((*s)->Prefill(prompt, l.data()).ok());
      for (int k = 0; k < 20; ++k) {
        all.insert(all.end(), l.begin(), l.end());
        ASSERT_TRUE((*s)->Step(Argmax(l), l.data()).ok());
      }
      runs.push_back(std::move(all));
    }
    unsetenv("FAK_CUDA_GRAPHS");
    unsetenv("FAK_CUDA_PDL");
    for (size_t i = 1; i < runs.size(); ++i) {
      ASSERT_EQ(runs[0].size(), runs[i].size());
      EXPECT_EQ(std::memcmp(runs[0].data(), runs[i].data(), runs[0].size() * 4), 0) << "mode " << i;
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
}

}  // namespace
}  // namespace fak

namespace fak {
namespace {

// The hybrid's recurrent layers on the GPU: four prompts prefilled together and stepped together give
// each sequence the bits it gets alone (qwen35-tiny, f32 weights).
TEST(CudaModel, HybridSequencesGetTheSameBitsAloneAndInABatch) {
  SKIP_WITHOUT_GPU();
  auto m = LoadFor("tests/fixtures/hf/qwen35-tiny", WeightQuant::kF32, true);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto rt = Runtime::Create(
      **m, RuntimeOptions{.max_context = 256, .max_sequences = 4, .backend = {.name = "cuda"}});
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  const size_t vocab = static_cast<size_t>((*m)->config.vocab_size);
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 4; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(5 + 11 * i));
    for (size_t t = 0; t < p.size(); ++t) p[t] = static_cast<int32_t>((i * 7919 + t * 104729) % 150000);
    prompts.push_back(std::move(p));
  }
  const std::vector<int32_t> next = {11, 22, 33, 44};
  // Alone: prefill, then one step.
  std::vector<std::vector<float>> alone;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto seq = std::move((*rt)->NewSequence()).value();
    std::vector<float> l(vocab);
    SeqWork w{seq.get(), prompts[i], false, l.data()};
    ASSERT_TRUE((*rt)->Forward(std::span(&w, 1)).ok());
    w = {seq.get(), std::span<const int32_t>(&next[i], 1), false, l.data()};
    ASSERT_TRUE((*rt)->Forward(std::span(&w, 1)).ok());
    alone.push_back(l);
  }
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<std::vector<float>> got(prompts.size(), std::vector<float>(vocab));
  std::vector<SeqWork> work;
  for (size_t i = 0; i < prompts.size(); ++i) {
    seqs.push_back(std::move((*rt)->NewSequence()).value());
    work.push_back({seqs[i].get(), prompts[i], false, got[i].data()});
  }
  ASSERT_TRUE((*rt)->Forward(work).ok());
  work.clear();
  for (size_t i = 0; i < prompts.size(); ++i) {
    work.push_back({seqs[i].get(), std::span<const int32_t>(&next[i], 1), false, got[i].data()});
  }
  ASSERT_TRUE((*rt)->Forward(work).ok());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(std::memcmp(got[i].data(), alone[i].data(), vocab * 4), 0) << "sequence " << i;
  }
}

}  // namespace
}  // namespace fak
