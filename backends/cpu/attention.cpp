#include "backends/cpu/attention.h"

#include <cmath>

#include "backends/cpu/exp.h"  // ExpFast
#include "backends/cpu/ops.h"  // HalfToFloat

namespace fak::cpu {

namespace {

void AttendF32(const float* q, int64_t head_dim, const HeadKv& kv, int64_t n_ctx, float scale, float* scores,
               float* out) {
  auto row = [&](const uint16_t* const* pages, int64_t j) {
    return reinterpret_cast<const float*>(pages[j / kv.page_tokens]) + (j % kv.page_tokens) * head_dim;
  };
  float max_score = -INFINITY;
  for (int64_t j = 0; j < n_ctx; ++j) {
    const float* k = row(kv.k_pages, j);
    float s = 0;
    for (int64_t d = 0; d < head_dim; ++d) s += q[d] * k[d];
    scores[j] = s * scale;
    if (scores[j] > max_score) max_score = scores[j];
  }
  float sum = 0;
  for (int64_t j = 0; j < n_ctx; ++j) sum += (scores[j] = ExpFast(scores[j] - max_score));
  for (int64_t d = 0; d < head_dim; ++d) out[d] = 0;
  for (int64_t j = 0; j < n_ctx; ++j) {
    const float* v = row(kv.v_pages, j);
    for (int64_t d = 0; d < head_dim; ++d) out[d] += scores[j] * v[d];
  }
  const float inv = 1.0f / sum;
  for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
}

}  // namespace

void AttendHeadPortable(const float* q, int64_t head_dim, const HeadKv& kv, int64_t n_ctx, float scale,
                        float* scores, float* out) {
  if (kv.f32) {
    AttendF32(q, head_dim, kv, n_ctx, scale, scores, out);
    return;
  }
  float max_score = -INFINITY;
  for (int64_t j = 0; j < n_ctx; ++j) {
    const uint16_t* k = kv.k_pages[j / kv.page_tokens] + (j % kv.page_tokens) * head_dim;
    float s = 0;
    for (int64_t d = 0; d < head_dim; ++d) s += q[d] * HalfToFloat(k[d]);
    scores[j] = s * scale;
    if (scores[j] > max_score) max_score = scores[j];
  }
  float sum = 0;
  for (int64_t j = 0; j < n_ctx; ++j) {
    scores[j] = ExpFast(scores[j] - max_score);
    sum += scores[j];
  }
  for (int64_t d = 0; d < head_dim; ++d) out[d] = 0;
  for (int64_t j = 0; j < n_ctx; ++j) {
    const uint16_t* v = kv.v_pages[j / kv.page_tokens] + (j % kv.page_tokens) * head_dim;
    const float p = scores[j];
    for (int64_t d = 0; d < head_dim; ++d) out[d] += p * HalfToFloat(v[d]);
  }
  const float inv = 1.0f / sum;
  for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
}

int64_t AttendScratchFloats(int64_t group, int64_t head_dim, int64_t n_ctx) {
  return group * n_ctx + (kAttendTile + group) * head_dim + 16;
}

void AttendGroupPortable(const float* q, int64_t group, int64_t head_dim, const HeadKv& kv, int64_t n_ctx,
                         float scale, float* scratch, float* out) {
  for (int64_t g = 0; g < group; ++g) {
    AttendHeadPortable(q + g * head_dim, head_dim, kv, n_ctx, scale, scratch, out + g * head_dim);
  }
}

}  // namespace fak::cpu
