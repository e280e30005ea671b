// The ops of one forward step, queued between SetBatch and Synchronize and launched together: as a
// CUDA graph for small batches (a decode step is the same sequence of kernels every token, so its
// graph is captured once per batch shape and replayed), op by op otherwise. Queueing the whole step
// first also lets neighbouring ops fuse: matrices that read the same activations share one launch,
// and a bias or residual add that follows a matrix product joins its epilogue.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <vector>

#include "backends/cuda/kernels.h"  // MatVecJob
#include "core/status.h"

namespace fak::cuda {

class StepQueue {
 public:
  using Launch = std::function<cudaError_t(cudaStream_t)>;

  explicit StepQueue(cudaStream_t stream) : stream_(stream), profile_(ProfileEnabled()) {}
  ~StepQueue();
  StepQueue(const StepQueue&) = delete;
  StepQueue& operator=(const StepQueue&) = delete;

  // Starts a step. `shape` identifies everything the step's kernels read from fixed addresses (batch
  // sizes, staging areas); `graph` says whether to run it as a graph, `plain` whether its kernels go
  // in plain stream order (SetPlainLaunches).
  void Begin(std::vector<uint64_t> shape, bool graph, bool plain = false);
  bool in_step() const { return in_step_; }

  // An op: `key` lists every value its launch bakes in (pointers, sizes, scalars). Outside a step it
  // is launched at once and its launch error returned.
  cudaError_t Add(const char* what, std::vector<uint64_t> key, Launch launch);
  // A matrix product; joins the previous op when that is a product over the same activations.
  cudaError_t AddMatVec(const DeviceMatrix& w, const MatVecOut& out, const float* x, Q8Act xq, int64_t n);
  // The GEMM's piece scratch (MatVecJob::split) for the products queued from now on.
  void SetSplit(float* split, int64_t floats) {
    split_ = split;
    split_floats_ = floats;
  }
  // x (rows, cols) += bias or += y, folded into the previous product when it wrote exactly that
  // tensor (a bias also into an earlier one, past products that neither read nor write x); false when
  // it could not be (the caller queues the add itself).
  bool FuseBias(const float* x, int64_t rows, int64_t cols, const float* bias);
  bool FuseResidual(float* x, const float* y, int64_t rows, int64_t cols);
  // The row op `t` joins the previous product as its tail (MatVecTail) when that product wrote exactly
  // what the op reads: for kRmsNorm the residual t.x (rows, t.cols) of a single matrix, for kSiluMul
  // t.y and t.u as its two outputs, for kRopeKvWrite t.rq, t.k and t.v as its three outputs (t.k and
  // t.v its two when t.rq is null); false when it does not (the caller queues the op itself).
  bool FuseTail(MatVecTail t, int64_t rows);
  // The counters the tails count their blocks on: `count` of them in device memory, zero (null: no
  // tails). The RMS norm uses the first; the SiLU one per 32 elements, the rope one per q and k head.
  void SetTailCounters(unsigned* counters, int64_t count) {
    tail_counter_ = counters;
    tail_counters_ = count;
  }

  // Launches the step's ops after `before` (the batch upload), then ends the step.
  Status End(const std::function<cudaError_t()>& before);
  // Ends the step without launching anything (after an error).
  void Discard();
  // Forgets every captured graph (staging areas moved, buffers freed).
  void ForgetGraphs();
  // Forgets the graphs whose ops bake in a value in [begin, end): an address range about to be freed
  // or unregistered (a graph's copy into registered host memory holds on to that registration).
  void ForgetGraphsUsing(uint64_t begin, uint64_t end);

  int64_t graphs_captured() const { return captured_; }
  int64_t graphs_replayed() const { return replayed_; }

  // With FAK_CUDA_PROFILE=1 every step runs op by op with an event after each op, and this (called once
  // the stream has drained) logs at debug level the step's time per kind of op: kernel time and the
  // gaps between kernels, as the stream saw them.
  void ReportProfile();

 private:
  struct Op {
    const char* what = "";
    std::vector<uint64_t> key;
    Launch launch;
    bool matvec = false;
    MatVecJob job;
    const float* x = nullptr;
    Q8Act xq;
    int64_t n = 0;
  };
  struct Graph {
    std::vector<uint64_t> key;
    cudaGraphExec_t exec = nullptr;
  };
  static constexpr size_t kMaxGraphs = 32;
  static constexpr size_t kSeenShapes = 64;  // shapes run once and not captured, remembered by hash

  // FAK_CUDA_PROFILE=1 (read once, when the queue is made).
  static bool ProfileEnabled();
  Status LaunchAll();
  std::vector<uint64_t> StepKey() const;
  static std::string OpLabel(const Op& op);

  cudaStream_t stream_;
  float* split_ = nullptr;
  int64_t split_floats_ = 0;
  unsigned* tail_counter_ = nullptr;
  int64_t tail_counters_ = 0;
  bool in_step_ = false, graph_ = false, plain_ = false;
  std::vector<uint64_t> shape_;
  std::vector<Op> ops_;
  std::list<Graph> graphs_;     // most recently used first
  std::vector<uint64_t> seen_;  // hashes of the keys of the last kSeenShapes shapes seen once, oldest first
  int64_t captured_ = 0, replayed_ = 0;
  bool profile_ = false;
  std::vector<cudaEvent_t> events_;    // events_[0] before the first op, events_[i + 1] after op i
  std::vector<std::string> profiled_;  // the labels of the ops the events time
  int64_t profiled_rows_ = 0;
};

}  // namespace fak::cuda
