// The CUDA implementation of the Backend seam: weights uploaded once in GPU-friendly layouts
// (weights.h), activations and KV pages in device memory, every op queued on one stream. The first
// error among queued calls is reported by Synchronize().
#pragma once

#include <memory>

#include "ops/backend.h"

namespace fak::cuda {

struct CudaBackendOptions {
  int device = 0;
};

// An error naming the cause when no usable device is there (no GPU, driver too old, out of memory).
Result<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options = {});
// GGUF rows as stored: BindMatrix repacks them on upload.
const WeightLayout& CudaWeightLayout();

}  // namespace fak::cuda
