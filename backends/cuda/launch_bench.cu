// What a boundary between two dependent steps of work costs on the GPU, for `fak bench kernels
// --backend cuda` (kernels.h MeasureLaunchCosts): a kernel that does next to nothing, captured 256
// times in a row in a CUDA graph, with plain stream order and with programmatic dependent launch, at one
// block a multiprocessor and at eight; and a grid-wide barrier inside one kernel whose blocks are all
// resident (a cooperative launch, one block a multiprocessor), the mechanism a persistent decode kernel
// would put between its phases instead of a kernel boundary. A decode step of the 1.5B geometry has about
// 150 such boundaries; the difference between the two figures, times that count, is what a persistent
// kernel could take off a step before any of its work gets faster.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backends/cuda/kernels.h"
#include "backends/cuda/pdl.cuh"

namespace fak::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kChain = 256;

// One step of a chain: waits for the previous kernel, lets the next start, and carries a count from
// kernel to kernel through memory so each depends on the one before.
__global__ void __launch_bounds__(kThreads) ChainStepKernel(unsigned* count) {
  AfterPrevious();
  if (blockIdx.x == 0 && threadIdx.x == 0) *count += 1;
}

__device__ __forceinline__ unsigned LoadAcquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void StoreRelease(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// n barriers among all blocks of the grid (every block resident): arrivals counted on `arrived`, the
// last to arrive resets the count and advances `generation`, which the others wait for. Block 0 adds
// one to `count` between barriers, so each phase depends on the one before, as in a chain.
__global__ void __launch_bounds__(kThreads)
    GridBarriersKernel(unsigned* arrived, unsigned* generation, int n, unsigned* count) {
  for (int i = 0; i < n; ++i) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *count += 1;
    __syncthreads();
    if (threadIdx.x == 0) {
      const unsigned g = LoadAcquire(generation);  // cannot advance before this block arrives
      __threadfence();
      if (atomicAdd(arrived, 1u) == gridDim.x - 1) {
        atomicExch(arrived, 0u);
        __threadfence();
        StoreRelease(generation, g + 1);
      } else {
        while (LoadAcquire(generation) == g) {
        }
      }
    }
    __syncthreads();
  }
}

struct Scratch {
  unsigned* p = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Scratch() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (p != nullptr) cudaFree(p);
  }
};

#define FAK_TRY(expr)                 \
  do {                                \
    const cudaError_t e_ = (expr);    \
    if (e_ != cudaSuccess) return e_; \
  } while (0)

// Microseconds of one replay of s.exec (median of at least 7, and of at least min_seconds).
cudaError_t TimeExec(Scratch& s, cudaStream_t stream, double min_seconds, double* us) {
  FAK_TRY(cudaGraphLaunch(s.exec, stream));  // warm-up
  std::vector<float> ms;
  float spent = 0;
  while (ms.size() < 7 || spent < min_seconds * 1e3) {
    FAK_TRY(cudaEventRecord(s.start, stream));
    FAK_TRY(cudaGraphLaunch(s.exec, stream));
    FAK_TRY(cudaEventRecord(s.stop, stream));
    FAK_TRY(cudaEventSynchronize(s.stop));
    float t = 0;
    FAK_TRY(cudaEventElapsedTime(&t, s.start, s.stop));
    ms.push_back(t);
    spent += t + 0.05f;
    if (ms.size() > 10000) break;
  }
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
  *us = ms[ms.size() / 2] * 1e3;
  return cudaSuccess;
}

// Microseconds a kernel of the chain (kChain launches of `blocks` blocks in one graph).
cudaError_t ChainCost(Scratch& s, cudaStream_t stream, int blocks, bool pdl, double min_seconds, double* us) {
  if (s.exec != nullptr) cudaGraphExecDestroy(s.exec), s.exec = nullptr;
  cudaGraph_t graph = nullptr;
  FAK_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cudaError_t launch = cudaSuccess;
  for (int i = 0; i < kChain && launch == cudaSuccess; ++i) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(blocks));
    config.blockDim = dim3(kThreads);
    config.stream = stream;
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attr;
    config.numAttrs = pdl ? 1 : 0;
    launch = cudaLaunchKernelEx(&config, ChainStepKernel, s.p);
  }
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  FAK_TRY(launch);
  FAK_TRY(end);
  const cudaError_t inst = cudaGraphInstantiate(&s.exec, graph, 0);
  cudaGraphDestroy(graph);
  FAK_TRY(inst);
  double total = 0;
  FAK_TRY(TimeExec(s, stream, min_seconds, &total));
  *us = total / kChain;
  return cudaSuccess;
}

// Microseconds of one launch of the barrier kernel with n barriers (median of 7 launches).
cudaError_t BarriersTime(Scratch& s, cudaStream_t stream, int blocks, int n, double* us) {
  unsigned* arrived = s.p + 32;  // its own 128-byte line
  unsigned* generation = s.p + 64;
  unsigned* count = s.p;
  void* args[] = {&arrived, &generation, &n, &count};
  std::vector<float> ms;
  for (int rep = 0; rep < 8; ++rep) {
    FAK_TRY(cudaEventRecord(s.start, stream));
    FAK_TRY(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(GridBarriersKernel),
                                        dim3(static_cast<unsigned>(blocks)), dim3(kThreads), args, 0,
                                        stream));
    FAK_TRY(cudaEventRecord(s.stop, stream));
    FAK_TRY(cudaEventSynchronize(s.stop));
    float t = 0;
    FAK_TRY(cudaEventElapsedTime(&t, s.start, s.stop));
    if (rep > 0) ms.push_back(t);  // the first is a warm-up
  }
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
  *us = ms[ms.size() / 2] * 1e3;
  return cudaSuccess;
}

}  // namespace

cudaError_t MeasureLaunchCosts(cudaStream_t stream, double min_seconds, LaunchCosts* costs) {
  int device = 0, sms = 0, cooperative = 0;
  FAK_TRY(cudaGetDevice(&device));
  FAK_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  FAK_TRY(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  Scratch s;
  FAK_TRY(cudaMalloc(&s.p, 4096));
  FAK_TRY(cudaMemsetAsync(s.p, 0, 4096, stream));
  FAK_TRY(cudaEventCreate(&s.start));
  FAK_TRY(cudaEventCreate(&s.stop));
  *costs = LaunchCosts{};
  costs->sms = sms;
  FAK_TRY(ChainCost(s, stream, sms, false, min_seconds, &costs->plain_us));
  FAK_TRY(ChainCost(s, stream, sms, true, min_seconds, &costs->pdl_us));
  FAK_TRY(ChainCost(s, stream, 8 * sms, false, min_seconds, &costs->plain8_us));
  FAK_TRY(ChainCost(s, stream, 8 * sms, true, min_seconds, &costs->pdl8_us));
  if (cooperative != 0) {
    // The difference between many barriers and none takes the launch itself out.
    double none = 0, many = 0;
    constexpr int kBarriers = 4096;
    FAK_TRY(BarriersTime(s, stream, sms, 0, &none));
    FAK_TRY(BarriersTime(s, stream, sms, kBarriers, &many));
    costs->barrier_us = std::max(0.0, many - none) / kBarriers;
  }
  return cudaStreamSynchronize(stream);
}

#undef FAK_TRY

}  // namespace fak::cuda
