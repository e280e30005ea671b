// Causal attention of one query head over f16 keys/values held in fixed-size pages.
#pragma once

#include <cstdint>

namespace fak::cpu {

struct HeadKv {
  const uint16_t* const* k_pages;  // per page: (page_tokens, head_dim) f16, or f32 when `f32`
  const uint16_t* const* v_pages;
  int64_t page_tokens;
  bool f32 = false;
};

// out (head_dim) = softmax(q . K[0..n_ctx) * scale) . V[0..n_ctx). scores: n_ctx floats of scratch.
using AttendHeadFn = void (*)(const float* q, int64_t head_dim, const HeadKv& kv, int64_t n_ctx, float scale,
                              float* scores, float* out);

void AttendHeadPortable(const float* q, int64_t head_dim, const HeadKv& kv, int64_t n_ctx, float scale,
                        float* scores, float* out);
// nullptr when not compiled for this target.
AttendHeadFn AttendHeadAvx2();

}  // namespace fak::cpu
