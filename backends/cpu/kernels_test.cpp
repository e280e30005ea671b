// Every compiled ISA table must equal the scalar reference bit for bit, for matrix-vector and
// matrix-matrix, on random quants with zero blocks, extreme and tiny scales, odd row counts, token
// counts that leave partial tiles, and (for f16/bf16) row lengths with tails.
#include "backends/cpu/kernels.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/test_data.h"  // FloatHex, MakeRandomMatrix, MakeRandomActivations

namespace fak::cpu {
namespace {

struct Shape {
  GgmlType type;
  int64_t rows, cols;
};

std::vector<Shape> Shapes() {
  std::vector<Shape> s;
  for (int64_t rows : {1, 3, 5, 16, 17, 33, 67}) {
    for (int64_t cols : {32, 96, 544}) s.push_back({GgmlType::kQ8_0, rows, cols});
    for (int64_t cols : {256, 768}) {
      s.push_back({GgmlType::kQ4_K, rows, cols});
      s.push_back({GgmlType::kQ6_K, rows, cols});
    }
    for (int64_t cols : {1, 15, 16, 17, 100, 256}) {
      s.push_back({GgmlType::kF16, rows, cols});
      s.push_back({GgmlType::kBF16, rows, cols});
      s.push_back({GgmlType::kF32, rows, cols});
    }
  }
  return s;
}

class IsaTest : public ::testing::TestWithParam<Isa> {};

// The CPU's own word on its features, read from /proc/cpuinfo (not through the cpuid code the
// dispatcher uses): "flags" on x86-64, "Features" on arm64.
std::vector<std::string> CpuinfoFlags() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  std::vector<std::string> out;
  if (f == nullptr) return out;
  char line[8192];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    const std::string l = line;
    if (l.rfind("flags", 0) != 0 && l.rfind("Features", 0) != 0) continue;
    size_t at = l.find(':');
    while (at != std::string::npos && at < l.size()) {
      const size_t b = l.find_first_not_of(" \t\n:", at);
      if (b == std::string::npos) break;
      const size_t e = l.find_first_of(" \t\n", b);
      out.push_back(l.substr(b, e - b));
      at = e;
    }
    break;
  }
  std::fclose(f);
  return out;
}

// Every SIMD level the CPU reports must be compiled in and tested: a build that silently lost a
// level (a missing compiler flag, a failed feature probe) would otherwise test only the scalar
// table against itself.
TEST(Dispatch, EveryLevelTheCpuReportsIsTested) {
  const std::vector<std::string> flags = CpuinfoFlags();
  if (flags.empty()) GTEST_SKIP() << "skipped: no flags line in /proc/cpuinfo";
  auto has = [&flags](const char* f) { return std::find(flags.begin(), flags.end(), f) != flags.end(); };
  std::vector<Isa> want;
#if defined(__x86_64__)
  if (has("avx2") && has("fma") && has("f16c")) want.push_back(Isa::kAvx2);
  if (has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512_vnni") && has("f16c")) {
    want.push_back(Isa::kAvx512);
  }
#elif defined(__aarch64__)
  if (has("asimd") && has("asimddp")) want.push_back(Isa::kNeon);
#endif
  const std::vector<Isa> tested = AvailableIsas();
  for (Isa isa : want) {
    EXPECT_NE(std::find(tested.begin(), tested.end(), isa), tested.end())
        << "/proc/cpuinfo reports " << IsaName(isa) << " but its kernels are not compiled in or not detected";
  }
}

TEST(Dispatch, ScalarIsAlwaysThere) {
  const auto isas = AvailableIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::kScalar);
  ASSERT_NE(KernelsFor(Isa::kScalar), nullptr);
  std::printf("ISA levels on this machine:");
  for (Isa i : isas) std::printf(" %s", std::string(IsaName(i)).c_str());
  std::printf("; in use: %s\n", std::string(IsaName(Kernels().isa)).c_str());
  for (GgmlType type : kKernelTypes) {
    EXPECT_NE(Kernels().matvec[KernelSlot(type)], nullptr) << GgmlTypeName(type);
    EXPECT_NE(Kernels().matmul[KernelSlot(type)], nullptr) << GgmlTypeName(type);
  }
}

TEST_P(IsaTest, MatVecEqualsReferenceBitForBit) {
  const KernelTable* ref = KernelsFor(Isa::kScalar);
  const KernelTable* k = KernelsFor(GetParam());
  ASSERT_NE(k, nullptr);
  uint32_t seed = 100;
  for (const Shape& s : Shapes()) {
    const int slot = KernelSlot(s.type);
    const RandomMatrix m = MakeRandomMatrix(s.type, s.rows, s.cols, ++seed);
    const auto act = MakeRandomActivations(s.type, 1, s.cols, ++seed);
    std::vector<float> want(s.rows + 2, -1.0f), got(s.rows + 2, -1.0f);
    // Whole range, then a sub-range starting at an odd row.
    ref->matvec[slot](m.data.data(), m.row_bytes, s.cols, act.data(), want.data(), 0, s.rows);
    k->matvec[slot](m.data.data(), m.row_bytes, s.cols, act.data(), got.data(), 0, s.rows);
    for (int64_t r = 0; r < s.rows + 2; ++r) {
      ASSERT_EQ(FloatHex(got[r]), FloatHex(want[r]))
          << GgmlTypeName(s.type) << " rows " << s.rows << " cols " << s.cols << " row " << r;
    }
    if (s.rows > 2) {
      std::vector<float> part(s.rows + 2, -1.0f);
      k->matvec[slot](m.data.data(), m.row_bytes, s.cols, act.data(), part.data(), 1, s.rows - 1);
      EXPECT_EQ(FloatHex(part[0]), FloatHex(-1.0f));
      EXPECT_EQ(FloatHex(part[s.rows - 1]), FloatHex(-1.0f));
      for (int64_t r = 1; r < s.rows - 1; ++r) ASSERT_EQ(FloatHex(part[r]), FloatHex(want[r])) << r;
    }
  }
}

TEST_P(IsaTest, MatMulEqualsReferenceBitForBit) {
  const KernelTable* ref = KernelsFor(Isa::kScalar);
  const KernelTable* k = KernelsFor(GetParam());
  ASSERT_NE(k, nullptr);
  uint32_t seed = 500;
  for (const Shape& s : Shapes()) {
    if (s.rows > 33) continue;
    const int slot = KernelSlot(s.type);
    const RandomMatrix m = MakeRandomMatrix(s.type, s.rows, s.cols, ++seed);
    for (int64_t n_tokens : {2, 3, 7, 21}) {
      const auto act = MakeRandomActivations(s.type, n_tokens, s.cols, ++seed);
      const size_t stride = ActivationRowBytes(s.type, s.cols);
      const int64_t ldy = s.rows + 3;
      std::vector<float> want(ldy * n_tokens, -1.0f), got(ldy * n_tokens, -1.0f);
      ref->matmul[slot](m.data.data(), m.row_bytes, s.cols, act.data(), stride, n_tokens, want.data(), ldy, 0,
                        s.rows);
      k->matmul[slot](m.data.data(), m.row_bytes, s.cols, act.data(), stride, n_tokens, got.data(), ldy, 0,
                      s.rows);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(FloatHex(got[i]), FloatHex(want[i]))
            << GgmlTypeName(s.type) << " rows " << s.rows << " cols " << s.cols << " tokens " << n_tokens
            << " token " << i / ldy << " row " << i % ldy;
      }
      // Matrix-matrix on one token's activations equals matrix-vector: results do not depend on batch.
      std::vector<float> mv(s.rows);
      k->matvec[slot](m.data.data(), m.row_bytes, s.cols, act.data() + stride * (n_tokens - 1), mv.data(), 0,
                      s.rows);
      for (int64_t r = 0; r < s.rows; ++r)
        ASSERT_EQ(FloatHex(mv[r]), FloatHex(got[(n_tokens - 1) * ldy + r])) << r;
    }
  }
}

std::vector<Isa> NonScalarIsas() {
  std::vector<Isa> out;
  for (Isa i : AvailableIsas()) {
    if (i != Isa::kScalar) out.push_back(i);
  }
  if (out.empty()) out.push_back(Isa::kScalar);  // still exercises the harness on a plain CPU
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllIsas, IsaTest, ::testing::ValuesIn(NonScalarIsas()),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(IsaName(info.param));
                         });

}  // namespace
}  // namespace fak::cpu
