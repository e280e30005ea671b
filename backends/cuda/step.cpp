#include "backends/cuda/step.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "core/log.h"

namespace fak::cuda {
namespace {

uint64_t U(const void* p) { return reinterpret_cast<uint64_t>(p); }

// FNV-1a over the key's words (a collision only makes a shape seen once be captured).
uint64_t KeyHash(const std::vector<uint64_t>& key) {
  uint64_t h = 14695981039346656037ull;
  for (uint64_t v : key) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xFF)) * 1099511628211ull;
  }
  return h;
}

Status LaunchError(cudaError_t e, const char* what) {
  return Internal("CUDA: {}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

}  // namespace

StepQueue::~StepQueue() {
  ForgetGraphs();
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void StepQueue::ForgetGraphs() {
  for (Graph& g : graphs_) cudaGraphExecDestroy(g.exec);
  graphs_.clear();
}

void StepQueue::ForgetGraphsUsing(uint64_t begin, uint64_t end) {
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    if (std::any_of(it->key.begin(), it->key.end(), [&](uint64_t v) { return v >= begin && v < end; })) {
      cudaGraphExecDestroy(it->exec);
      it = graphs_.erase(it);
    } else {
      ++it;
    }
  }
}

bool StepQueue::ProfileEnabled() {
  const char* v = std::getenv("FAK_CUDA_PROFILE");
  return v != nullptr && v[0] == '1';
}

void StepQueue::Begin(std::vector<uint64_t> shape, bool graph, bool plain) {
  ops_.clear();
  shape_ = std::move(shape);
  shape_.push_back(plain ? 1 : 0);
  graph_ = graph && !profile_;
  plain_ = plain;
  in_step_ = true;
}

cudaError_t StepQueue::Add(const char* what, std::vector<uint64_t> key, Launch launch) {
  if (!in_step_) return launch(stream_);
  ops_.push_back({what, std::move(key), std::move(launch)});
  return cudaSuccess;
}

cudaError_t StepQueue::AddMatVec(const DeviceMatrix& w, const MatVecOut& out, const float* x, Q8Act xq,
                                 int64_t n) {
  if (in_step_ && !ops_.empty()) {
    Op& last = ops_.back();
    MatVecJob& j = last.job;
    if (last.matvec && last.x == x && last.xq.q == xq.q && last.xq.group == xq.group && last.n == n &&
        j.count < MatVecJob::kMax && j.tail.kind == TailKind::kNone && j.w[0].format == w.format &&
        j.w[0].cols == w.cols) {
      j.w[j.count] = w;
      j.out[j.count] = out;
      ++j.count;
      return cudaSuccess;
    }
  }
  Op op;
  op.what = "MatMul";
  op.matvec = true;
  op.job.count = 1;
  op.job.w[0] = w;
  op.job.out[0] = out;
  op.job.split = split_;
  op.job.split_floats = split_floats_;
  op.x = x;
  op.xq = xq;
  op.n = n;
  if (!in_step_) return MatVec(op.job, x, xq, n, stream_);
  ops_.push_back(op);
  return cudaSuccess;
}

namespace {
bool Overlap(const float* a, int64_t na, const float* b, int64_t nb) { return a < b + nb && b < a + na; }
}  // namespace

bool StepQueue::FuseBias(const float* x, int64_t rows, int64_t cols, const float* bias) {
  if (!in_step_) return false;
  // The product that wrote x: the last op, or one before products that neither read nor write x (q and
  // k in one product and v in the next, when v's matrix has another format: each bias joins the product
  // that wrote its rows, and the bias adds its output as the add would, the same bits).
  const int64_t nx = rows * cols;
  for (size_t i = ops_.size(); i-- > 0;) {
    Op& op = ops_[i];
    if (!op.matvec || op.n != rows || op.job.tail.kind != TailKind::kNone) return false;
    MatVecJob& j = op.job;
    for (int k = 0; k < j.count; ++k) {
      MatVecOut& o = j.out[k];
      if (o.y == x && j.w[k].rows == cols && o.ldy == cols && o.bias == nullptr && o.residual == nullptr) {
        o.bias = bias;
        return true;
      }
      if (Overlap(o.y, op.n * o.ldy, x, nx) ||
          (o.residual != nullptr && Overlap(o.residual, op.n * o.ldr, x, nx)))
        return false;
    }
    if (Overlap(op.x, op.n * j.w[0].cols, x, nx)) return false;  // it reads x before the add
  }
  return false;
}

bool StepQueue::FuseResidual(float* x, const float* y, int64_t rows, int64_t cols) {
  if (!in_step_ || ops_.empty() || !ops_.back().matvec || ops_.back().n != rows) return false;
  Op& last = ops_.back();
  if (last.x == x) return false;  // the product reads x: it must not change under it
  if (last.job.tail.kind != TailKind::kNone) return false;
  MatVecJob& j = last.job;
  for (int k = 0; k < j.count; ++k) {
    MatVecOut& o = j.out[k];
    if (o.y == y && j.w[k].rows == cols && o.ldy == cols && o.residual == nullptr) {
      o.residual = x;
      o.ldr = cols;
      return true;
    }
  }
  return false;
}

bool StepQueue::FuseTail(MatVecTail t, int64_t rows) {
  if (!in_step_ || tail_counter_ == nullptr || ops_.empty() || !ops_.back().matvec || ops_.back().n != rows) {
    return false;
  }
  Op& last = ops_.back();
  MatVecJob& j = last.job;
  if (j.tail.kind != TailKind::kNone) return false;
  const auto wrote = [&](int k, const float* p, int64_t cols) {
    return j.out[k].y == p && j.out[k].ldy == cols && j.w[k].rows == cols && j.out[k].residual == nullptr;
  };
  switch (t.kind) {
    case TailKind::kNone: return false;
    case TailKind::kRmsNorm:
      if (j.count != 1 || j.out[0].residual != t.x || j.out[0].ldr != t.cols || j.w[0].rows != t.cols ||
          t.cols > 32 * kNormMaxRuns) {
        return false;
      }
      break;
    case TailKind::kSiluMul:
      if (j.count != 2 || !wrote(0, t.y, t.cols) || !wrote(1, t.u, t.cols)) return false;
      if ((t.cols + 31) / 32 > tail_counters_) return false;
      break;
    case TailKind::kRopeKvWrite: {
      const int64_t kv_cols = t.kv.n_kv_head * t.head_dim;
      const int first = t.rq != nullptr ? 1 : 0;
      if (j.count != first + 2 || (t.rq != nullptr && !wrote(0, t.rq, t.q_cols)) ||
          !wrote(first, t.k, kv_cols) || !wrote(first + 1, t.v, kv_cols)) {
        return false;
      }
      // A round of a block's rows (4, or 1 for long rows) stays inside one head.
      if (t.head_dim % 4 != 0 || t.q_cols % t.head_dim != 0 ||
          t.q_cols / t.head_dim + t.kv.n_kv_head > tail_counters_) {
        return false;
      }
      break;
    }
  }
  // The product must not read what the tail writes.
  const void* writes[] = {t.y, t.rq, t.k};
  for (const void* p : writes) {
    if (p != nullptr && p == last.x) return false;
  }
  t.counter = tail_counter_;
  j.tail = t;
  return true;
}

std::vector<uint64_t> StepQueue::StepKey() const {
  std::vector<uint64_t> key = shape_;
  for (const Op& op : ops_) {
    key.push_back(op.matvec ? 1 : 2);
    if (!op.matvec) {
      key.push_back(op.key.size());
      key.insert(key.end(), op.key.begin(), op.key.end());
      continue;
    }
    key.insert(key.end(), {U(op.x), U(op.xq.q), U(op.xq.d), static_cast<uint64_t>(op.xq.group),
                           static_cast<uint64_t>(op.n), static_cast<uint64_t>(op.job.count), U(op.job.split),
                           static_cast<uint64_t>(op.job.split_floats)});
    for (int k = 0; k < op.job.count; ++k) {
      const DeviceMatrix& w = op.job.w[k];
      const MatVecOut& o = op.job.out[k];
      key.insert(key.end(),
                 {static_cast<uint64_t>(w.format), static_cast<uint64_t>(w.rows),
                  static_cast<uint64_t>(w.cols), U(w.q), U(w.d), U(o.y), static_cast<uint64_t>(o.ldy),
                  U(o.bias), U(o.residual), static_cast<uint64_t>(o.ldr)});
    }
    const MatVecTail& t = op.job.tail;
    if (t.kind != TailKind::kNone) {
      uint32_t eps_bits = 0;
      std::memcpy(&eps_bits, &t.eps, 4);
      key.insert(key.end(), {static_cast<uint64_t>(t.kind),
                             static_cast<uint64_t>(TailInKernel(t.kind)),
                             U(t.counter),
                             U(t.x),
                             U(t.w),
                             U(t.y),
                             U(t.u),
                             static_cast<uint64_t>(t.cols),
                             eps_bits,
                             U(t.q),
                             static_cast<uint64_t>(t.group),
                             U(t.d),
                             U(t.rq),
                             static_cast<uint64_t>(t.q_cols),
                             U(t.k),
                             U(t.v),
                             static_cast<uint64_t>(t.head_dim),
                             static_cast<uint64_t>(t.half),
                             static_cast<uint64_t>(t.layer),
                             U(t.cos_sin),
                             t.neox,
                             U(t.kv.page_ptr),
                             static_cast<uint64_t>(t.kv.n_kv_head),
                             static_cast<uint64_t>(t.kv.head_dim),
                             static_cast<uint64_t>(t.kv.page_tokens),
                             t.kv.f32,
                             U(t.b.positions),
                             U(t.b.row_seq),
                             U(t.b.page_begin),
                             U(t.b.pages)});
    }
  }
  return key;
}

std::string StepQueue::OpLabel(const Op& op) {
  if (!op.matvec) return op.what;
  int64_t rows = 0;
  for (int k = 0; k < op.job.count; ++k) rows += op.job.w[k].rows;
  // A tail that runs as its own launch (FAK_CUDA_TAILS unset, or several activation rows) is timed with
  // the product; the label says which.
  static constexpr const char* kTails[] = {"", " + RmsNorm", " + SiluMul", " + RopeKvWrite"};
  const TailKind kind = op.job.tail.kind;
  const char* where = kind == TailKind::kNone               ? ""
                      : TailRunsInKernel(op.job.tail, op.n) ? " (in kernel)"
                                                            : " (own launch)";
  return fmt::format("MatMul {}x{}{}{}", rows, op.job.w[0].cols, kTails[static_cast<int>(kind)], where);
}

Status StepQueue::LaunchAll() {
  struct Plain {  // for this step's launches (and captures) alone
    explicit Plain(bool on) { SetPlainLaunches(on); }
    ~Plain() { SetPlainLaunches(false); }
  } plain(plain_);
  const bool timed = profile_ && !graph_;
  if (timed) {
    while (events_.size() < ops_.size() + 1) {
      cudaEvent_t e = nullptr;
      if (cudaEventCreate(&e) != cudaSuccess) return LaunchError(cudaGetLastError(), "profile event");
      events_.push_back(e);
    }
    profiled_.clear();
    profiled_rows_ = shape_.empty() ? 0 : static_cast<int64_t>(shape_[0]);
    cudaEventRecord(events_[0], stream_);
  }
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    const cudaError_t e = op.matvec ? MatVec(op.job, op.x, op.xq, op.n, stream_) : op.launch(stream_);
    if (e != cudaSuccess) return LaunchError(e, op.what);
    if (timed) {
      cudaEventRecord(events_[i + 1], stream_);
      profiled_.push_back(OpLabel(op));
    }
  }
  return Status::Ok();
}

void StepQueue::ReportProfile() {
  if (profiled_.empty()) return;
  std::map<std::string, std::pair<double, int64_t>> by_label;
  double total = 0;
  for (size_t i = 0; i < profiled_.size(); ++i) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, events_[i], events_[i + 1]) != cudaSuccess) {
      (void)cudaGetLastError();
      break;
    }
    auto& [sum, count] = by_label[profiled_[i]];
    sum += ms;
    ++count;
    total += ms;
  }
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [label, v] : by_label)
    order.emplace_back(v.first, fmt::format("{} {:.3f} ms x{}", label, v.first, v.second));
  std::sort(order.rbegin(), order.rend());
  std::string line =
      fmt::format("CUDA step of {} rows: {} ops, {:.3f} ms:", profiled_rows_, profiled_.size(), total);
  for (const auto& [ms, text] : order) line += " | " + text;
  FAK_LOG_DEBUG("{}", line);
  profiled_.clear();
}

Status StepQueue::End(const std::function<cudaError_t()>& before) {
  in_step_ = false;
  if (const cudaError_t e = before(); e != cudaSuccess) {
    ops_.clear();
    return LaunchError(e, "batch upload");
  }
  if (!graph_) {
    Status s = LaunchAll();
    ops_.clear();
    return s;
  }
  std::vector<uint64_t> key = StepKey();
  for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
    if (it->key != key) continue;
    graphs_.splice(graphs_.begin(), graphs_, it);
    ops_.clear();
    ++replayed_;
    const cudaError_t e = cudaGraphLaunch(graphs_.front().exec, stream_);
    return e == cudaSuccess ? Status::Ok() : LaunchError(e, "graph launch");
  }
  // The first time a shape is seen its ops are launched one by one and the shape remembered; the second
  // time it is captured. A capture runs nothing until the graph is built and instantiated, so a shape
  // that comes once (the prompt steps of a burst of requests, the last decode steps of a batch as its
  // requests end) ran later than its ops launched directly would have.
  const uint64_t hash = KeyHash(key);
  if (std::find(seen_.begin(), seen_.end(), hash) == seen_.end()) {
    if (seen_.size() >= kSeenShapes) seen_.erase(seen_.begin());
    seen_.push_back(hash);
    Status s = LaunchAll();
    ops_.clear();
    return s;
  }
  cudaGraph_t graph = nullptr;
  if (const cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
      e != cudaSuccess) {
    Status s = LaunchAll();
    ops_.clear();
    return s;
  }
  Status launched = LaunchAll();
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  cudaGraphExec_t exec = nullptr;
  if (!launched.ok() || ended != cudaSuccess || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    cudaGetLastError();
    if (graph != nullptr) cudaGraphDestroy(graph);
    // Run the step op by op instead; a launch error there is the one to report.
    Status s = LaunchAll();
    ops_.clear();
    if (s.ok() && !launched.ok()) s = launched;
    return s;
  }
  cudaGraphDestroy(graph);
  ops_.clear();
  if (graphs_.size() >= kMaxGraphs) {
    cudaGraphExecDestroy(graphs_.back().exec);
    graphs_.pop_back();
  }
  graphs_.push_front({std::move(key), exec});
  ++captured_;
  const cudaError_t e = cudaGraphLaunch(exec, stream_);
  return e == cudaSuccess ? Status::Ok() : LaunchError(e, "graph launch");
}

void StepQueue::Discard() {
  ops_.clear();
  in_step_ = false;
}

}  // namespace fak::cuda
