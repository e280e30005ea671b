// Addressing the paged KV cache from a kernel (kernels.h's DeviceKv).
#pragma once

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace fak::cuda {

// Position pos's row in its page (add the layer's and KV head's offset for its keys or values). The
// index arithmetic is 32-bit: a 64-bit division by the runtime page size is a call of ~100 instructions,
// and a loop over positions would make one per position.
template <typename T>
__device__ __forceinline__ const T* PositionRow(const DeviceKv& kv, const int32_t* table, int64_t pos,
                                                int64_t hd) {
  const auto p = static_cast<uint32_t>(pos), pt = static_cast<uint32_t>(kv.page_tokens);
  return static_cast<const T*>(kv.page_ptr[table[p / pt]]) + (p % pt) * static_cast<uint32_t>(hd);
}

// The int8 shadow of one output value v: its 32-value block's scale from the block's largest magnitude
// (the same formula as every kernel that writes a shadow).
__device__ __forceinline__ float ShadowScale(float amax) { return amax / 127.0f; }
__device__ __forceinline__ int8_t ShadowValue(float v, float dv) {
  return static_cast<int8_t>(__float2int_rn(v * (dv > 0.0f ? 1.0f / dv : 0.0f)));
}

}  // namespace fak::cuda
