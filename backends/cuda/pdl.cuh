// Programmatic dependent launch (sm_90): a kernel launched with Launch() may start while the kernel
// before it on the stream is still running, so its launch, its blocks' start-up and whatever it does
// before WaitForPrevious() (a matrix kernel prefetches its weights, which no kernel writes) overlap the
// previous kernel's tail. Every kernel of the backend calls WaitForPrevious() before it reads or writes
// any buffer another kernel touches, and then AllowNext(), which lets the following kernel start once
// all of this kernel's blocks have reached that point. The wait returns when the previous kernel has
// finished and its writes are visible, exactly as ordinary stream order, so no result changes.
// FAK_CUDA_PDL=0 launches every kernel in plain stream order (for comparisons); so do the steps for which
// the step queue sets PlainLaunches() (kernels.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <utility>

namespace fak::cuda {

__device__ __forceinline__ void WaitForPrevious() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void AllowNext() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Both, at the top of a kernel that has nothing to do before its inputs are ready.
__device__ __forceinline__ void AfterPrevious() {
  WaitForPrevious();
  AllowNext();
}

// Brings the 128-byte line holding p into L2.
__device__ __forceinline__ void PrefetchL2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Brings the line holding p into L1 (for reads after the wait).
__device__ __forceinline__ void PrefetchL1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

bool PlainLaunches();  // kernels.h

inline bool PdlEnabled() {
  if (PlainLaunches()) return false;
  const char* v = std::getenv("FAK_CUDA_PDL");
  return v == nullptr || v[0] != '0';
}

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic dependent launch allowed.
template <typename... Params, typename... Args>
cudaError_t Launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = PdlEnabled() ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  const cudaError_t last = cudaGetLastError();  // clears the error state, as after <<<...>>>
  return e != cudaSuccess ? e : last;
}

}  // namespace fak::cuda
