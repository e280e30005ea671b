#include "backends/cpu/test_data.h"

#include <cstdio>
#include <cstring>

#include "backends/cpu/kernels.h"  // ActivationRowBytes, QuantizeActivations
#include "quant/f16.h"
#include "quant/q4_k.h"
#include "quant/q6_k.h"
#include "quant/q8_0.h"

namespace fak::cpu {
namespace {

uint16_t RandomHalfScale(std::mt19937& rng, bool special) {
  const uint32_t kind = special ? rng() % 16 : 5;
  if (kind == 0) return 0;                                              // zero scale
  if (kind == 1) return static_cast<uint16_t>(1 + rng() % 0x3FF);       // subnormal: tiny
  if (kind == 2) return static_cast<uint16_t>(0x7800 + rng() % 0x3FF);  // 32768..65504: extreme
  std::uniform_real_distribution<float> u(1e-4f, 0.05f);
  return Fp32ToFp16(u(rng));
}

}  // namespace

RandomMatrix MakeRandomMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed, bool special) {
  RandomMatrix m;
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  std::mt19937 rng(seed);
  switch (type) {
    case GgmlType::kF16:
    case GgmlType::kBF16: {
      m.row_bytes = static_cast<size_t>(cols) * 2;
      m.data.resize(m.row_bytes * rows);
      std::normal_distribution<float> g(0.0f, 1.0f);
      uint16_t* p = reinterpret_cast<uint16_t*>(m.data.data());
      for (int64_t i = 0; i < rows * cols; ++i) {
        float v = g(rng);
        if (special && rng() % 64 == 0) v *= 1e4f;
        if (special && rng() % 64 == 0) v *= 1e-6f;
        if (special && rng() % 64 == 0) v = 0.0f;
        p[i] = type == GgmlType::kF16 ? Fp32ToFp16(v) : Fp32ToBf16(v);
      }
      return m;
    }
    case GgmlType::kF32: {
      m.row_bytes = static_cast<size_t>(cols) * 4;
      m.data.resize(m.row_bytes * rows);
      std::normal_distribution<float> g(0.0f, 1.0f);
      float* p = reinterpret_cast<float*>(m.data.data());
      for (int64_t i = 0; i < rows * cols; ++i) {
        float v = g(rng);
        if (special && rng() % 64 == 0) v *= 1e20f;
        if (special && rng() % 64 == 0) v *= 1e-30f;
        if (special && rng() % 64 == 0) v = 0.0f;
        p[i] = v;
      }
      return m;
    }
    case GgmlType::kQ8_0: {
      const int64_t nb = cols / kQK8_0;
      m.row_bytes = nb * sizeof(BlockQ8_0);
      m.data.resize(m.row_bytes * rows);
      BlockQ8_0* b = reinterpret_cast<BlockQ8_0*>(m.data.data());
      for (int64_t i = 0; i < rows * nb; ++i) {
        b[i].d = RandomHalfScale(rng, special);
        const bool zero = special && rng() % 16 == 0;
        for (int k = 0; k < kQK8_0; ++k) b[i].qs[k] = zero ? 0 : static_cast<int8_t>(rng() & 0xFF);
      }
      return m;
    }
    case GgmlType::kQ4_K: {
      const int64_t nb = cols / kQK_K;
      m.row_bytes = nb * sizeof(BlockQ4_K);
      m.data.resize(m.row_bytes * rows);
      BlockQ4_K* b = reinterpret_cast<BlockQ4_K*>(m.data.data());
      for (int64_t i = 0; i < rows * nb; ++i) {
        b[i].d = RandomHalfScale(rng, special);
        b[i].dmin = RandomHalfScale(rng, special);
        const bool zero = special && rng() % 16 == 0;
        for (auto& s : b[i].scales) s = zero ? 0 : static_cast<uint8_t>(rng());
        for (auto& q : b[i].qs) q = zero ? 0 : static_cast<uint8_t>(rng());
      }
      return m;
    }
    case GgmlType::kQ6_K: {
      const int64_t nb = cols / kQK_K;
      m.row_bytes = nb * sizeof(BlockQ6_K);
      m.data.resize(m.row_bytes * rows);
      BlockQ6_K* b = reinterpret_cast<BlockQ6_K*>(m.data.data());
      for (int64_t i = 0; i < rows * nb; ++i) {
        b[i].d = RandomHalfScale(rng, special);
        const bool zero = special && rng() % 16 == 0;
        for (auto& q : b[i].ql) q = zero ? 0 : static_cast<uint8_t>(rng());
        for (auto& q : b[i].qh) q = zero ? 0 : static_cast<uint8_t>(rng());
        for (auto& s : b[i].scales) s = zero ? 0 : static_cast<int8_t>(rng());
      }
      return m;
    }
    default: return m;  // no kernels: empty
  }
}

std::vector<uint8_t> MakeRandomActivations(GgmlType type, int64_t n_tokens, int64_t cols, uint32_t seed,
                                           bool special) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const size_t stride = ActivationRowBytes(type, cols);
  std::vector<uint8_t> out(stride * n_tokens);
  std::vector<float> x(cols);
  const bool is_float = type == GgmlType::kF16 || type == GgmlType::kBF16 || type == GgmlType::kF32;
  const int64_t block = type == GgmlType::kQ8_0 ? 32 : is_float ? 16 : 256;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t b0 = 0; b0 < cols; b0 += block) {
      const uint32_t kind = special ? rng() % 8 : 7;
      // Q8_0 activation scales are f16: keep "huge" within its range.
      const float scale = kind == 0 ? 0.0f : kind == 1 ? 1e-7f : kind == 2 ? 1e3f : 1.0f;
      for (int64_t i = b0; i < b0 + block && i < cols; ++i) x[i] = scale * g(rng);
    }
    QuantizeActivations(type, x.data(), out.data() + t * stride, cols);
  }
  return out;
}

std::string FloatHex(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", u);
  return buf;
}

}  // namespace fak::cpu
