#include "backends/cuda/activations.h"

namespace fak::cuda {

Result<void*> DeviceAlloc(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (e == cudaSuccess) return p;
  cudaGetLastError();
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  return Busy("CUDA: cannot allocate {:.1f} MiB for {} ({}; {:.1f} MiB free of {:.1f} MiB)",
              bytes / 1048576.0, what, cudaGetErrorString(e), free_b / 1048576.0, total_b / 1048576.0);
}

Activations::~Activations() {
  for (auto& [address, b] : buffers_) Release(b);
}

void Activations::Release(Buffer& b) {
  cudaFree(b.f32);
  cudaFree(b.q);
  cudaFree(b.d);
}

Result<Tensor> Activations::Alloc(int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return InvalidArgument("tensor shape ({}, {}) is empty", rows, cols);
  Buffer b;
  b.elems = rows * cols;
  const auto n = static_cast<size_t>(b.elems);
  FAK_ASSIGN_OR_RETURN(void* f, DeviceAlloc(n * 4, "an activation tensor"));
  b.f32 = static_cast<float*>(f);
  if (b.elems % 32 == 0) {
    auto q = DeviceAlloc(n, "an activation's int8 shadow");
    auto d = q.ok() ? DeviceAlloc(n / 32 * 4, "an activation's scales") : Result<void*>(q.status());
    if (!q.ok() || !d.ok()) {
      if (q.ok()) cudaFree(*q);
      cudaFree(f);
      return q.ok() ? d.status() : q.status();
    }
    b.q = static_cast<int8_t*>(*q);
    b.d = static_cast<float*>(*d);
  }
  if (const cudaError_t e = cudaMemsetAsync(b.f32, 0, n * 4, stream); e != cudaSuccess) {
    Release(b);
    return Internal("CUDA: zeroing a tensor: {}", cudaGetErrorString(e));
  }
  buffers_[reinterpret_cast<uintptr_t>(b.f32)] = b;
  return Tensor{b.f32, rows, cols};
}

bool Activations::Free(const Tensor& t) {
  auto it = buffers_.find(reinterpret_cast<uintptr_t>(t.data));
  if (it == buffers_.end()) return false;
  Release(it->second);
  buffers_.erase(it);
  return true;
}

Activations::Buffer* Activations::Find(const Tensor& t, int64_t* offset) {
  auto it = buffers_.upper_bound(reinterpret_cast<uintptr_t>(t.data));
  if (it == buffers_.begin()) return nullptr;
  --it;
  Buffer& b = it->second;
  const int64_t off = t.data - b.f32;
  if (off < 0 || off + t.rows * t.cols > b.elems) return nullptr;
  *offset = off;
  return &b;
}

bool Activations::ShadowSlot(const Tensor& t, Q8Act* slot) {
  int64_t off = 0;
  Buffer* b = Find(t, &off);
  if (b == nullptr || b->q == nullptr || off % 32 != 0 || (t.rows * t.cols) % 32 != 0) return false;
  slot->q = b->q + off;
  slot->d = b->d + off / 32;
  return true;
}

bool Activations::ShadowValid(const Tensor& t, int* group) {
  int64_t off = 0;
  Buffer* b = Find(t, &off);
  if (b == nullptr || off < b->valid_begin || off + t.rows * t.cols > b->valid_end) return false;
  // t reads groups along its own rows: those the writer made, or, when both its rows and the writer's
  // are whole groups and t begins on a group's boundary, the same consecutive runs.
  const int64_t g = b->valid_group;
  const bool same_rows = t.cols == b->valid_row && (off - b->valid_begin) % b->valid_row == 0;
  const bool whole = t.cols % g == 0 && b->valid_row % g == 0 && (off - b->valid_begin) % g == 0;
  if (!same_rows && !whole) return false;
  *group = b->valid_group;
  return true;
}

void Activations::Shadowed(const Tensor& t, int group, int64_t row) {
  int64_t off = 0;
  if (Buffer* b = Find(t, &off)) {
    b->valid_begin = off;
    b->valid_end = off + t.rows * t.cols;
    b->valid_group = group;
    b->valid_row = row > 0 ? row : t.cols;
  }
}

void Activations::Written(const Tensor& t) {
  int64_t off = 0;
  if (Buffer* b = Find(t, &off)) b->valid_begin = b->valid_end = 0;
}

}  // namespace fak::cuda
