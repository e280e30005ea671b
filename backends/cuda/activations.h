// The CUDA backend's activation tensors: f32 buffers in device memory, each with an int8 shadow
// (kernels.h's Q8Act) that the quantized matrix kernels read, and a record of which element range of
// the shadow matches the f32 values. An op that writes a tensor either writes its shadow too
// (Shadowed) or makes it stale (Written); a quantized MatMul whose input shadow is stale quantizes it
// first. Views (Tensor::Rows, Tensor::Reshaped) are found in the buffer they lie in.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>

#include "backends/cuda/kernels.h"  // Q8Act
#include "core/status.h"
#include "ops/backend.h"  // Tensor

namespace fak::cuda {

// cudaMalloc with an error that says what the memory was for, how much was asked for and how much is
// free.
Result<void*> DeviceAlloc(size_t bytes, const char* what);

class Activations {
 public:
  Activations() = default;
  Activations(const Activations&) = delete;
  Activations& operator=(const Activations&) = delete;
  ~Activations();

  // A zeroed (rows, cols) tensor, zeroed on `stream`; an error that names the bytes when memory runs out.
  Result<Tensor> Alloc(int64_t rows, int64_t cols, cudaStream_t stream);
  // False when t is not a tensor Alloc returned. The caller makes sure no queued work uses it.
  bool Free(const Tensor& t);

  // Where the int8 shadow of t lies, when its buffer has one and t covers whole 32-element runs.
  bool ShadowSlot(const Tensor& t, Q8Act* slot);
  // Whether t's shadow holds t's current values in groups that run along t's rows; if so, *group is its
  // Q8Act::group.
  bool ShadowValid(const Tensor& t, int* group);
  // t and its shadow were written together, in groups of `group` values that restart every `row` values
  // from t's first (t.cols by default; groups over the whole view serve any reader whose rows are a whole
  // number of groups).
  void Shadowed(const Tensor& t, int group, int64_t row = 0);
  void Written(const Tensor& t);  // t was written, its buffer's shadow is stale

 private:
  struct Buffer {
    float* f32 = nullptr;
    int8_t* q = nullptr;
    float* d = nullptr;
    int64_t elems = 0;
    int64_t valid_begin = 0, valid_end = 0;
    int valid_group = 32;
    int64_t valid_row = 0;  // the shadow's groups restart every valid_row elements from valid_begin
  };
  // The buffer a tensor view lies in, and the view's first element in it.
  Buffer* Find(const Tensor& t, int64_t* offset);
  static void Release(Buffer& b);

  std::map<uintptr_t, Buffer> buffers_;  // by the f32 address
};

}  // namespace fak::cuda
