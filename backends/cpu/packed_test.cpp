// The packed layout: every level's packed kernels equal the scalar reference on the GGUF layout bit for
// bit (odd row counts, partial token tiles, sub-ranges), the MatMul op gives the same bits packed and
// plain, and PackMatrix rejects what it cannot pack.
#include "backends/cpu/packed.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/matmul.h"
#include "backends/cpu/test_data.h"  // FloatHex, MakeRandomMatrix, MakeRandomActivations
#include "quant/codec.h"
#include "quant/f16.h"   // Fp32ToFp16
#include "quant/q4_k.h"  // BlockQ4_K
#include "quant/q6_k.h"  // BlockQ6_K

namespace fak::cpu {
namespace {

std::vector<uint8_t> Pack(const RandomMatrix& m) {
  std::vector<uint8_t> out(PackedBytes(m.type, m.rows, m.cols), 0xEE);
  EXPECT_TRUE(PackMatrix(m.type, m.data.data(), m.rows, m.cols, out.data()).ok());
  return out;
}

TEST(Packed, Sizes) {
  // A group is 16 rows, rounded up to 64 bytes; the last group is padded.
  EXPECT_EQ(PackedGroupBytes(GgmlType::kQ8_0, 4096), 16u * 128 * 34);
  EXPECT_EQ(PackedBytes(GgmlType::kQ8_0, 16, 32), 576u);  // 544 -> 576
  EXPECT_EQ(PackedBytes(GgmlType::kQ8_0, 17, 64), 2u * 1088);
  EXPECT_EQ(PackedBytes(GgmlType::kQ4_K, 8960, 1536), 8960u / 16 * 16 * 6 * 144);
  EXPECT_EQ(PackedBytes(GgmlType::kQ4_K, 16, 100), 0u);
  EXPECT_EQ(PackedBytes(GgmlType::kF16, 16, 256), 0u);
  EXPECT_TRUE(HasPackedLayout(GgmlType::kQ8_0));
  EXPECT_TRUE(HasPackedLayout(GgmlType::kQ6_K));
  EXPECT_FALSE(HasPackedLayout(GgmlType::kF16));
  EXPECT_EQ(PackedGroupBytes(GgmlType::kQ6_K, 512), 16u * 2 * 210);
}

TEST(Packed, RejectsWhatItCannotPack) {
  std::vector<uint8_t> in(1 << 16), out(1 << 16);
  EXPECT_EQ(PackMatrix(GgmlType::kQ5_K, in.data(), 16, 256, out.data()).code(), StatusCode::kUnsupported);
  EXPECT_EQ(PackMatrix(GgmlType::kQ8_0, in.data(), 16, 33, out.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackMatrix(GgmlType::kQ4_K, in.data(), 0, 256, out.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PackMatrix(GgmlType::kQ8_0, nullptr, 16, 32, out.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakePackedQuantMatrix(GgmlType::kF16, in.data(), 16, 256).status().code(),
            StatusCode::kUnsupported);
}

class PackedIsaTest : public ::testing::TestWithParam<Isa> {};

TEST_P(PackedIsaTest, EqualsReferenceBitForBit) {
  const KernelTable* ref = KernelsFor(Isa::kScalar);
  const KernelTable* k = KernelsFor(GetParam());
  ASSERT_NE(k, nullptr);
  uint32_t seed = 900;
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const int slot = KernelSlot(type);
    ASSERT_NE(k->packed[slot], nullptr);
    const std::vector<int64_t> cols_list =
        type == GgmlType::kQ8_0 ? std::vector<int64_t>{32, 96, 544} : std::vector<int64_t>{256, 768};
    for (int64_t rows : {1, 5, 16, 17, 33, 67}) {
      for (int64_t cols : cols_list) {
        const RandomMatrix m = MakeRandomMatrix(type, rows, cols, ++seed);
        const std::vector<uint8_t> packed = Pack(m);
        // Whole tiles and every kind of tail: AVX-512 tiles are 8 (q8_0, q6_k) and 6 (q4_k) tokens, and
        // k-quant tails of 5 or more tokens take the wide loop (5: q4_k and q6_k; 14: q6_k's 6).
        for (int64_t n_tokens : {1, 2, 3, 5, 7, 9, 14, 21}) {
          const auto act = MakeRandomActivations(type, n_tokens, cols, ++seed);
          const size_t stride = ActivationRowBytes(type, cols);
          std::vector<uint8_t> pact(PackedActivationBytes(type, cols, n_tokens));
          PackActivations(type, act.data(), stride, cols, n_tokens, pact.data());
          const int64_t ldy = rows + 3;
          std::vector<float> want(ldy * n_tokens, -1.0f), got(ldy * n_tokens, -1.0f);
          ref->matmul[slot](m.data.data(), m.row_bytes, cols, act.data(), stride, n_tokens, want.data(), ldy,
                            0, rows);
          k->packed[slot](packed.data(), cols, pact.data(), n_tokens, got.data(), ldy, 0, rows);
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_EQ(FloatHex(got[i]), FloatHex(want[i]))
                << GgmlTypeName(type) << " rows " << rows << " cols " << cols << " tokens " << n_tokens
                << " token " << i / ldy << " row " << i % ldy;
          }
          // A sub-range starting at the second group writes only its rows.
          if (rows > 17) {
            std::vector<float> part(ldy * n_tokens, -1.0f);
            k->packed[slot](packed.data(), cols, pact.data(), n_tokens, part.data(), ldy, 16, rows - 1);
            for (int64_t t = 0; t < n_tokens; ++t) {
              for (int64_t r = 0; r < ldy; ++r) {
                const float expect = r >= 16 && r < rows - 1 ? want[t * ldy + r] : -1.0f;
                ASSERT_EQ(FloatHex(part[t * ldy + r]), FloatHex(expect)) << "t " << t << " r " << r;
              }
            }
          }
        }
      }
    }
  }
}

// The integer sums at their largest: every quant at its extreme (Q4_K nibbles 15; Q6_K values 63 and
// 0, that is +31 and -32; Q8_0 -128 and 127) against activations of +127 and -127, so a kernel that adds
// products in a narrower type before widening them (the AVX2 Q4_K tile adds 8 vpmaddubsw pairs in
// int16) would overflow here first.
TEST_P(PackedIsaTest, EqualsReferenceAtTheLargestSums) {
  const KernelTable* ref = KernelsFor(Isa::kScalar);
  const KernelTable* k = KernelsFor(GetParam());
  ASSERT_NE(k, nullptr);
  constexpr int64_t kRows = 16, kCols = 512, kTokens = 13;
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    for (const uint8_t fill : {uint8_t{0xFF}, uint8_t{0x00}, uint8_t{0x80}, uint8_t{0x7F}}) {
      RandomMatrix m = MakeRandomMatrix(type, kRows, kCols, 77, /*special=*/false);
      const uint16_t one = Fp32ToFp16(1.0f);
      for (int64_t r = 0; r < kRows; ++r) {
        uint8_t* row = m.data.data() + r * m.row_bytes;
        if (type == GgmlType::kQ8_0) {
          for (int64_t b = 0; b < kCols / 32; ++b) {
            uint8_t* blk = row + b * 34;
            std::memcpy(blk, &one, 2);
            std::memset(blk + 2, fill, 32);
          }
        } else if (type == GgmlType::kQ4_K) {
          for (int64_t b = 0; b < kCols / 256; ++b) {
            auto* blk = reinterpret_cast<BlockQ4_K*>(row + b * sizeof(BlockQ4_K));
            blk->d = one;
            blk->dmin = one;
            std::memset(blk->scales, 0xFF, sizeof(blk->scales));  // scales and minimums 63
            std::memset(blk->qs, fill == 0x00 ? 0x00 : 0xFF, sizeof(blk->qs));
          }
        } else {
          for (int64_t b = 0; b < kCols / 256; ++b) {
            auto* blk = reinterpret_cast<BlockQ6_K*>(row + b * sizeof(BlockQ6_K));
            std::memset(blk->ql, fill == 0x00 ? 0x00 : 0xFF, sizeof(blk->ql));
            std::memset(blk->qh, fill == 0x00 ? 0x00 : 0xFF, sizeof(blk->qh));
            std::memset(blk->scales, fill == 0x80 ? 0x80 : 0x7F, sizeof(blk->scales));  // -128 or 127
            blk->d = one;
          }
        }
      }
      const std::vector<uint8_t> packed = Pack(m);
      // Tokens of all +1, all -1 and alternating signs: activations of +-127.
      std::vector<float> x(kTokens * kCols);
      for (int64_t t = 0; t < kTokens; ++t) {
        for (int64_t i = 0; i < kCols; ++i) {
          x[t * kCols + i] = t % 3 == 0 ? 1.0f : t % 3 == 1 ? -1.0f : (i % 2 == 0 ? 1.0f : -1.0f);
        }
      }
      const size_t stride = ActivationRowBytes(type, kCols);
      std::vector<uint8_t> act(stride * kTokens);
      for (int64_t t = 0; t < kTokens; ++t) QuantizeActivations(type, &x[t * kCols], &act[t * stride], kCols);
      std::vector<uint8_t> pact(PackedActivationBytes(type, kCols, kTokens));
      PackActivations(type, act.data(), stride, kCols, kTokens, pact.data());
      std::vector<float> want(kRows * kTokens, -1.0f), got(kRows * kTokens, -1.0f);
      ref->matmul[KernelSlot(type)](m.data.data(), m.row_bytes, kCols, act.data(), stride, kTokens,
                                    want.data(), kRows, 0, kRows);
      k->packed[KernelSlot(type)](packed.data(), kCols, pact.data(), kTokens, got.data(), kRows, 0, kRows);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(FloatHex(got[i]), FloatHex(want[i]))
            << GgmlTypeName(type) << " fill " << int{fill} << " token " << i / kRows << " row " << i % kRows;
      }
    }
  }
}

// Every level's activation quantizer writes the same bytes as the reference, specials included.
TEST_P(PackedIsaTest, ActivationQuantizersEqualReference) {
  const KernelTable* k = KernelsFor(GetParam());
  ASSERT_NE(k, nullptr);
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t n = 512, n_tokens = 3;
  std::vector<float> x(n * n_tokens);
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t kind = rng() % 64;
    const size_t block = i / 32;
    x[i] = block % 5 == 1   ? 0.0f
           : block % 5 == 2 ? 1e-30f * g(rng)
           : block % 5 == 3 ? 1e30f * g(rng)
                            : g(rng);
    if (kind == 0) x[i] = std::numeric_limits<float>::quiet_NaN();
    if (kind == 1) x[i] = -std::numeric_limits<float>::infinity();
    if (kind == 2) x[i] = 0.5f;  // ties round to even
  }
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const size_t bytes = PackedActivationBytes(type, n, n_tokens);
    std::vector<uint8_t> want(bytes, 0xAB), got(bytes, 0xCD);
    for (int64_t t = 0; t < n_tokens; ++t) {
      QuantizePackedActivations(type, x.data() + t * n, n, t, n_tokens, want.data());
      k->quantize_packed[KernelSlot(type)](x.data() + t * n, n, t, n_tokens, got.data());
    }
    EXPECT_EQ(std::memcmp(want.data(), got.data(), bytes), 0) << GgmlTypeName(type);
  }
}

std::vector<Isa> Levels() { return AvailableIsas(); }

INSTANTIATE_TEST_SUITE_P(AllIsas, PackedIsaTest, ::testing::ValuesIn(Levels()),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(IsaName(info.param));
                         });

// The op: packed and GGUF layouts give identical bits, for 1 and 2 threads, decode and prefill.
TEST(Packed, MatMulOpMatchesPlainLayout) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  ThreadPool pool1(1), pool2(2);
  // 32768 columns: 36-40 KB of packed activations per token, so 37 tokens (over 1 MB) go in chunks of
  // 16, 16 and 5.
  for (const auto& [type, cols] : {std::pair{GgmlType::kQ8_0, 512}, std::pair{GgmlType::kQ4_K, 512},
                                   std::pair{GgmlType::kQ6_K, 512}, std::pair{GgmlType::kQ8_0, 32768},
                                   std::pair{GgmlType::kQ4_K, 32768}, std::pair{GgmlType::kQ6_K, 32768}}) {
    const int64_t rows = 53;
    const size_t row_bytes = *GgmlRowBytes(type, cols);
    std::vector<float> wf(rows * cols);
    for (auto& v : wf) v = 0.05f * g(rng);
    std::vector<uint8_t> wq(row_bytes * rows);
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(QuantizeRow(type, wf.data() + r * cols, wq.data() + r * row_bytes, cols).ok());
    }
    auto plain = MakeQuantMatrix(type, wq.data(), rows, cols);
    ASSERT_TRUE(plain.ok());
    std::vector<uint8_t> wp(PackedBytes(plain->type, rows, cols));
    ASSERT_TRUE(PackMatrix(type, wq.data(), rows, cols, wp.data()).ok());
    auto packed = MakePackedQuantMatrix(type, wp.data(), rows, cols);
    ASSERT_TRUE(packed.ok());
    EXPECT_TRUE(packed->packed);
    // 1: decode; 11: packed tiles; 37: GGUF rows packed on the fly, checked against the scalar table.
    for (int64_t n_tokens : {1, 11, 37}) {
      std::vector<float> x(n_tokens * cols);
      for (auto& v : x) v = g(rng);
      std::vector<float> y_plain(n_tokens * rows), y1(n_tokens * rows), y2(n_tokens * rows);
      std::vector<float> y_ref(n_tokens * rows);
      ASSERT_TRUE(MatMul(*plain, x.data(), n_tokens, y_ref.data(), pool1, KernelsFor(Isa::kScalar)).ok());
      ASSERT_TRUE(MatMul(*plain, x.data(), n_tokens, y_plain.data(), pool2).ok());
      EXPECT_EQ(std::memcmp(y_ref.data(), y_plain.data(), y1.size() * 4), 0)
          << GgmlTypeName(type) << " " << cols << " " << n_tokens;
      ASSERT_TRUE(MatMul(*packed, x.data(), n_tokens, y1.data(), pool1).ok());
      ASSERT_TRUE(MatMul(*packed, x.data(), n_tokens, y2.data(), pool2).ok());
      EXPECT_EQ(std::memcmp(y_plain.data(), y1.data(), y1.size() * 4), 0)
          << GgmlTypeName(type) << " " << cols << " " << n_tokens;
      EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0)
          << GgmlTypeName(type) << " " << cols << " " << n_tokens;
    }
  }
}

// A matrix of random weights in both layouts, kept with its storage.
struct TwoLayouts {
  std::vector<uint8_t> gguf, packed_bytes;
  QuantMatrix plain, packed;
};
TwoLayouts RandomMatrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 0.05f);
  const size_t row_bytes = *GgmlRowBytes(type, cols);
  std::vector<float> wf(static_cast<size_t>(rows * cols));
  for (auto& v : wf) v = g(rng);
  TwoLayouts m;
  m.gguf.resize(row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(QuantizeRow(type, wf.data() + r * cols, m.gguf.data() + r * row_bytes, cols).ok());
  }
  m.packed_bytes.resize(PackedBytes(type, rows, cols));
  EXPECT_TRUE(PackMatrix(type, m.gguf.data(), rows, cols, m.packed_bytes.data()).ok());
  m.plain = *MakeQuantMatrix(type, m.gguf.data(), rows, cols);
  m.packed = *MakePackedQuantMatrix(type, m.packed_bytes.data(), rows, cols);
  return m;
}

// The fused SwiGLU half gives the bits of its three steps on the GGUF layout (whose products take their
// activations whole), across chunks of tokens and threads. 200 rows are 13 groups of 16, so 37 tokens
// in 3 chunks make 39 work items, claimed 3 at a time with 2 threads: some ranges start inside one
// chunk and end in the next.
TEST(Packed, SwiGluEqualsItsSteps) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  ThreadPool pool1(1), pool2(2);
  struct Case {
    GgmlType type;
    int64_t rows, cols;
  };
  for (const Case& k :
       {Case{GgmlType::kQ8_0, 53, 512}, Case{GgmlType::kQ4_K, 53, 512}, Case{GgmlType::kQ6_K, 53, 512},
        Case{GgmlType::kQ8_0, 53, 32768}, Case{GgmlType::kQ4_K, 53, 32768}, Case{GgmlType::kQ6_K, 53, 32768},
        Case{GgmlType::kQ8_0, 200, 32768}}) {
    const TwoLayouts gate = RandomMatrix(k.type, k.rows, k.cols, rng),
                     up = RandomMatrix(k.type, k.rows, k.cols, rng);
    ASSERT_TRUE(CanFuseSwiGLU(gate.packed, up.packed));
    EXPECT_FALSE(CanFuseSwiGLU(gate.plain, up.plain));
    for (int64_t n_tokens : {1, 11, 37}) {
      std::vector<float> x(static_cast<size_t>(n_tokens * k.cols));
      for (auto& v : x) v = g(rng);
      const size_t n = static_cast<size_t>(n_tokens * k.rows);
      std::vector<float> want_g(n), want_u(n);
      ASSERT_TRUE(MatMul(gate.plain, x.data(), n_tokens, want_g.data(), pool2).ok());
      ASSERT_TRUE(MatMul(up.plain, x.data(), n_tokens, want_u.data(), pool2).ok());
      Kernels().silu_mul(want_g.data(), want_u.data(), static_cast<int64_t>(n));
      for (ThreadPool* pool : {&pool1, &pool2}) {
        std::vector<float> got_g(n, -1.0f), got_u(n, -1.0f);
        ASSERT_TRUE(
            MatMulSwiGLU(gate.packed, up.packed, x.data(), n_tokens, got_g.data(), got_u.data(), *pool).ok());
        EXPECT_EQ(std::memcmp(want_g.data(), got_g.data(), n * 4), 0)
            << GgmlTypeName(k.type) << " " << k.rows << "x" << k.cols << " " << n_tokens << " threads "
            << pool->size();
        EXPECT_EQ(std::memcmp(want_u.data(), got_u.data(), n * 4), 0)
            << GgmlTypeName(k.type) << " " << k.rows << "x" << k.cols << " " << n_tokens << " threads "
            << pool->size();
      }
    }
  }
  // Matrices it cannot fuse are refused by name, not computed.
  const TwoLayouts a = RandomMatrix(GgmlType::kQ8_0, 32, 256, rng),
                   b = RandomMatrix(GgmlType::kQ4_K, 32, 256, rng);
  std::vector<float> x(256), y(32), z(32);
  EXPECT_FALSE(CanFuseSwiGLU(a.packed, b.packed));
  const Status s = MatMulSwiGLU(a.packed, b.packed, x.data(), 1, y.data(), z.data(), pool1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("q4_k"), std::string::npos) << s.message();
}

// Several products of one input in one call give each product's bits (MatMul on the GGUF layout), for
// a mix of weight types and row counts (q, k and v of a Q4_K_M layer: Q4_K, Q4_K, Q6_K; a Q8_0 one; a
// matrix of fewer rows than a group), fused for one token and in turn for more, on 1, 2 and 3 threads.
TEST(Packed, MatMulManyEqualsEachProduct) {
  std::mt19937 rng(12);
  std::normal_distribution<float> g(0.0f, 1.0f);
  ThreadPool pool1(1), pool2(2), pool3(3);
  constexpr int64_t kCols = 1536;
  const std::vector<std::pair<GgmlType, int64_t>> shapes = {{GgmlType::kQ4_K, 200},
                                                            {GgmlType::kQ4_K, 32},
                                                            {GgmlType::kQ6_K, 32},
                                                            {GgmlType::kQ8_0, 53},
                                                            {GgmlType::kQ6_K, 7}};
  std::vector<TwoLayouts> m;
  for (const auto& [type, rows] : shapes) m.push_back(RandomMatrix(type, rows, kCols, rng));
  std::vector<const QuantMatrix*> packed;
  for (const TwoLayouts& t : m) packed.push_back(&t.packed);
  // 1 token (decode), prompts whose activations stay whole, and one whose do not (700 tokens of 1536
  // columns: over MatMul's 1 MB, so the products go one by one).
  for (int64_t n_tokens : {1, 5, 37, 700}) {
    std::vector<float> x(static_cast<size_t>(n_tokens * kCols));
    for (auto& v : x) v = g(rng);
    for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
      std::vector<std::vector<float>> want(m.size()), got(m.size());
      std::vector<float*> outs;
      for (size_t i = 0; i < m.size(); ++i) {
        const size_t n = static_cast<size_t>(n_tokens * m[i].plain.rows);
        want[i].assign(n, 0.0f);
        got[i].assign(n, -1.0f);
        ASSERT_TRUE(MatMul(m[i].plain, x.data(), n_tokens, want[i].data(), *pool).ok());
        outs.push_back(got[i].data());
      }
      ASSERT_TRUE(MatMulMany(packed, x.data(), n_tokens, outs, *pool).ok());
      for (size_t i = 0; i < m.size(); ++i) {
        EXPECT_EQ(std::memcmp(want[i].data(), got[i].data(), want[i].size() * 4), 0)
            << "matrix " << i << " " << GgmlTypeName(m[i].plain.type) << " tokens " << n_tokens << " threads "
            << pool->size();
      }
      // A matrix in the GGUF layout among them goes its own way; the packed ones still share a call.
      std::vector<const QuantMatrix*> mixed = packed;
      mixed[1] = &m[1].plain;
      for (auto& v : got) std::fill(v.begin(), v.end(), -1.0f);
      ASSERT_TRUE(MatMulMany(mixed, x.data(), n_tokens, outs, *pool).ok());
      for (size_t i = 0; i < m.size(); ++i) {
        EXPECT_EQ(std::memcmp(want[i].data(), got[i].data(), want[i].size() * 4), 0)
            << "mixed layouts, matrix " << i << " tokens " << n_tokens << " threads " << pool->size();
      }
    }
  }
  // A matrix count that does not match the outputs is refused by name.
  std::vector<float> x(kCols), y(200);
  float* one[] = {y.data()};
  const Status s = MatMulMany(packed, x.data(), 1, one, pool1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("outputs"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fak::cpu
