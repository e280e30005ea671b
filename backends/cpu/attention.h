// Causal attention of one query head over f16 keys/values held in fixed-size pages.
#pragma once

#include <cstdint>

namespace fak::cpu {

// Positions whose keys or values a grouped kernel converts to f32 at a time.
constexpr int64_t kAttendTile = 64;

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

// The `group` query heads that share one KV head (grouped-query attention) at once: q and out hold
// `group` heads of head_dim floats each. Each head's result is exactly that of the kernel's one-head
// form (group == 1); sharing only saves converting the keys and values once per head.
// scratch: AttendScratchFloats(group, head_dim, n_ctx) floats.
using AttendGroupFn = void (*)(const float* q, int64_t group, int64_t head_dim, const HeadKv& kv,
                               int64_t n_ctx, float scale, float* scratch, float* out);
int64_t AttendScratchFloats(int64_t group, int64_t head_dim, int64_t n_ctx);
// Head by head through AttendHeadPortable.
void AttendGroupPortable(const float* q, int64_t group, int64_t head_dim, const HeadKv& kv, int64_t n_ctx,
                         float scale, float* scratch, float* out);
AttendGroupFn AttendGroupAvx2();  // nullptr when not compiled for this target
// The AVX2 kernel's arithmetic on 16-lane registers: the same bits, faster (attention_avx512.cpp).
AttendGroupFn AttendGroupAvx512();

}  // namespace fak::cpu
