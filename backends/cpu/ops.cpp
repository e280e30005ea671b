#include "backends/cpu/ops.h"

#include <array>
#include <cmath>
#include <vector>

#include "backends/cpu/exp.h"  // SiluMulOne
#include "quant/codec.h"
#include "quant/f16.h"

namespace fak::cpu {
namespace {

const float* HalfTable() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = Fp16ToFp32(static_cast<uint16_t>(i));
    return t;
  }();
  return table.data();
}

}  // namespace

float HalfToFloat(uint16_t h) { return HalfTable()[h]; }
uint16_t FloatToHalf(float f) { return Fp32ToFp16(f); }

void RmsNorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] * scale) * w[i];
  }
}

void AddBias(float* x, const float* b, int64_t n_rows, int64_t n) {
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < n; ++i) x[r * n + i] += b[i];
  }
}

void Rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos, const float* inv_freq,
          bool neox, float attn_factor) {
  const int64_t half = rot_dim / 2;
  // cos/sin once per position, shared by every head.
  float cs[512], sn[512];
  float* c = half <= 512 ? cs : new float[half];
  float* s = half <= 512 ? sn : new float[half];
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * static_cast<double>(inv_freq[i]);
    c[i] = static_cast<float>(std::cos(angle)) * attn_factor;
    s[i] = static_cast<float>(std::sin(angle)) * attn_factor;
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t a = neox ? i : 2 * i;
      const int64_t b = neox ? i + half : 2 * i + 1;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c[i] - x1 * s[i];
      v[b] = x1 * c[i] + x0 * s[i];
    }
  }
  if (c != cs) delete[] c;
  if (s != sn) delete[] s;
}

void SiluMul(float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] = SiluMulOne(g[i], u[i]);
}

Status EmbeddingRow(const Weight& table, int64_t id, float* out, GgmlType as_type) {
  if (table.packed) return Internal("embedding lookup from a packed matrix");
  if (id < 0 || id >= table.rows) {
    return OutOfRange("token id {} is outside the vocabulary (0..{})", id, table.rows - 1);
  }
  const uint8_t* src = table.row(id);
  thread_local std::vector<uint8_t> aligned;
  if (reinterpret_cast<uintptr_t>(src) % 4 != 0) {  // rows read in place from an unpadded safetensors file
    aligned.assign(src, src + table.row_bytes);
    src = aligned.data();
  }
  FAK_RETURN_IF_ERROR(DequantizeRow(table.type, src, out, table.cols));
  if (as_type == table.type || as_type == GgmlType::kF32) return Status::Ok();
  auto bytes = GgmlRowBytes(as_type, static_cast<uint64_t>(table.cols));
  if (!bytes) return Internal("embedding rows of {} do not fit {}", table.cols, GgmlTypeName(as_type));
  thread_local std::vector<uint8_t> row;
  row.resize(static_cast<size_t>(*bytes));
  FAK_RETURN_IF_ERROR(QuantizeRow(as_type, out, row.data(), table.cols));
  return DequantizeRow(as_type, row.data(), out, table.cols);
}

}  // namespace fak::cpu
