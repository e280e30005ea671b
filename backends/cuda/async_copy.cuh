// cp.async: 16-byte (and 4-byte) copies from global to shared memory that do not pass through registers, in
// groups a thread can wait for (all but the newest N).
#pragma once

namespace fak::cuda {

// Zeros when !valid (nothing is read from src, which must still be a valid address).
__device__ __forceinline__ void CopyAsync16(void* dst, const void* src, bool valid = true) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 16 : 0));
}
// A 4-byte copy (the cached variant: cp.async.cg takes only 16).
__device__ __forceinline__ void CopyAsync4(void* dst, const void* src, bool valid = true) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void CopyCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kNewest>
__device__ __forceinline__ void CopyWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kNewest));
}

}  // namespace fak::cuda
