#include "backends/cuda/kernel_bench.h"

#include <cuda_runtime.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string_view>
#include <utility>

#include "backends/cuda/activations.h"   // DeviceAlloc
#include "backends/cuda/backend_impl.h"  // CudaStatus
#include "backends/cuda/cuda_backend.h"  // CreateCudaBackend
#include "backends/cuda/kernels.h"
#include "core/timer.h"
#include "quant/ggml_type.h"

namespace fak::cuda {
namespace {

struct Shape {
  std::string name;
  std::vector<int64_t> rows;  // one per matrix of the launch
  int64_t cols = 0;
};

// The products of one layer (and the output layer) of each geometry. The 27B's attention q is 24 heads
// of 256 with their gates; its Gated-DeltaNet input is q, k (16 heads of 128 each) and v (48 of 128).
const char* const kDefaultShapes[] = {
    "1.5b-qkv:1536+256+256x1536",   "1.5b-o:1536x1536",
    "1.5b-gate-up:8960+8960x1536",  "1.5b-down:1536x8960",
    "1.5b-output:151936x1536",      "7b-qkv:3584+512+512x3584",
    "7b-gate-up:18944+18944x3584",  "7b-down:3584x18944",
    "27b-deltanet-in:10240x5120",   "27b-attn-q:12288x5120",
    "27b-gate-up:17408+17408x5120", "27b-down:5120x17408",
};

Result<Shape> ParseShape(std::string_view text) {
  Shape s;
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return InvalidArgument("shape '{}': want NAME:ROWS[+ROWS]xCOLS", text);
  s.name = std::string(text.substr(0, colon));
  std::string_view dims = text.substr(colon + 1);
  const size_t x = dims.find('x');
  if (x == std::string_view::npos) return InvalidArgument("shape '{}': want NAME:ROWS[+ROWS]xCOLS", text);
  auto number = [](std::string_view v) -> std::optional<int64_t> {
    if (v.empty() || v.size() > 9) return std::nullopt;
    int64_t n = 0;
    for (char c : v) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + (c - '0');
    }
    return n > 0 ? std::optional<int64_t>(n) : std::nullopt;
  };
  std::string_view rows = dims.substr(0, x);
  while (!rows.empty()) {
    const size_t plus = rows.find('+');
    const auto r = number(rows.substr(0, plus));
    if (!r) return InvalidArgument("shape '{}': rows must be positive integers", text);
    s.rows.push_back(*r);
    rows = plus == std::string_view::npos ? std::string_view() : rows.substr(plus + 1);
  }
  const auto cols = number(dims.substr(x + 1));
  if (!cols || *cols % 256 != 0)
    return InvalidArgument("shape '{}': columns must be a multiple of 256", text);
  if (s.rows.empty() || s.rows.size() > MatVecJob::kMax)
    return InvalidArgument("shape '{}': 1 to {} matrices per launch", text, MatVecJob::kMax);
  s.cols = *cols;
  return s;
}

// The device format of a GGUF type, where the matrix-vector kernels read it.
std::optional<MatFormat> FormatOf(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0: return MatFormat::kQ8_0;
    case GgmlType::kQ4_K: return MatFormat::kQ4_K;
    case GgmlType::kQ6_K: return MatFormat::kQ6_K;
    case GgmlType::kF16: return MatFormat::kF16;
    case GgmlType::kBF16: return MatFormat::kBF16;
    default: return std::nullopt;
  }
}

// Bytes of a row's quants or blocks, and of its separate f16 scales (weights.h).
int64_t QBytes(MatFormat f, int64_t cols) {
  switch (f) {
    case MatFormat::kQ8_0: return cols;
    case MatFormat::kQ4_K: return cols / 256 * 144;
    case MatFormat::kQ6_K: return cols / 256 * 208;
    case MatFormat::kF16:
    case MatFormat::kBF16: return cols * 2;
    case MatFormat::kF32: return cols * 4;
  }
  return 0;
}
int64_t ScaleCount(MatFormat f, int64_t cols) {
  return f == MatFormat::kQ8_0 ? cols / 32 : f == MatFormat::kQ6_K ? cols / 256 : 0;
}

// Random quants with finite scales: f16 scales between 2^-10 and 2^-6 (and Q4_K's d and dmin inside
// its blocks), bf16 and f16 weights of magnitude below 2.
void FillHost(MatFormat f, int64_t rows, int64_t cols, std::mt19937* rng, std::vector<uint8_t>* q,
              std::vector<uint16_t>* d) {
  q->resize(static_cast<size_t>(rows * QBytes(f, cols)));
  for (size_t i = 0; i + 4 <= q->size(); i += 4) {
    const uint32_t v = (*rng)();
    std::memcpy(q->data() + i, &v, 4);
  }
  auto scale = [&] { return static_cast<uint16_t>(0x1400 + (*rng)() % 0x1000); };
  d->assign(static_cast<size_t>(rows * ScaleCount(f, cols)), 0);
  for (uint16_t& s : *d) s = scale();
  auto* h = reinterpret_cast<uint16_t*>(q->data());
  if (f == MatFormat::kQ4_K) {
    for (size_t b = 0; b < q->size() / 144; ++b) {
      h[b * 72] = scale();
      h[b * 72 + 1] = scale();
    }
  } else if (f == MatFormat::kF16) {
    for (size_t i = 0; i < q->size() / 2; ++i) h[i] = static_cast<uint16_t>(h[i] & 0xBBFF);
  } else if (f == MatFormat::kBF16) {
    for (size_t i = 0; i < q->size() / 2; ++i) h[i] = static_cast<uint16_t>(h[i] & 0xBF7F);
  }
}

// Device memory freed on every path out.
struct DeviceBuffers {
  std::vector<void*> ptrs;
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
  template <class T>
  Result<T*> Alloc(size_t bytes, const char* what) {
    FAK_ASSIGN_OR_RETURN(void* p, DeviceAlloc(bytes, what));
    ptrs.push_back(p);
    return static_cast<T*>(p);
  }
};

// KEY=VALUE,KEY=VALUE set for the lifetime of the object, the earlier values put back after.
class ScopedSettings {
 public:
  static Result<std::vector<std::pair<std::string, std::string>>> Parse(const std::string& text) {
    std::vector<std::pair<std::string, std::string>> kv;
    std::string_view rest = text;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      const size_t eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0)
        return InvalidArgument("setting '{}': want KEY=VALUE[,KEY=VALUE]", text);
      kv.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    return kv;
  }
  explicit ScopedSettings(const std::vector<std::pair<std::string, std::string>>& kv) {
    for (const auto& [k, v] : kv) {
      const char* old = std::getenv(k.c_str());
      saved_.emplace_back(k, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
      setenv(k.c_str(), v.c_str(), 1);
    }
  }
  ~ScopedSettings() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        unsetenv(it->first.c_str());
      }
    }
  }
  ScopedSettings(const ScopedSettings&) = delete;
  ScopedSettings& operator=(const ScopedSettings&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Events() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
};

// Milliseconds of one replay of `exec` (the median of replays over min_seconds, at least 5).
Result<double> TimeGraph(cudaGraphExec_t exec, cudaStream_t stream, const Events& ev, double min_seconds) {
  FAK_RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(exec, stream), "replaying a graph"));  // warm-up
  std::vector<double> ms;
  const Timer total;
  while (ms.size() < 5 || total.Seconds() < min_seconds) {
    FAK_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ev.start, stream), "recording an event"));
    FAK_RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(exec, stream), "replaying a graph"));
    FAK_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ev.stop, stream), "recording an event"));
    FAK_RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(ev.stop), "waiting for a graph"));
    float t = 0;
    FAK_RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&t, ev.start, ev.stop), "timing a graph"));
    ms.push_back(t);
  }
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

Status RunCudaKernelBench(const CudaKernelBenchOptions& options) {
  FILE* out = options.out;
  std::vector<Shape> shapes;
  if (options.shapes.empty()) {
    for (const char* s : kDefaultShapes) {
      FAK_ASSIGN_OR_RETURN(Shape shape, ParseShape(s));
      shapes.push_back(std::move(shape));
    }
  }
  for (const std::string& s : options.shapes) {
    FAK_ASSIGN_OR_RETURN(Shape shape, ParseShape(s));
    shapes.push_back(std::move(shape));
  }
  std::vector<std::pair<std::string, MatFormat>> formats;
  for (const GgmlType t : options.types.empty()
                              ? std::vector<GgmlType>{GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}
                              : options.types) {
    const auto f = FormatOf(t);
    if (!f) {
      return InvalidArgument("bench kernels --backend cuda: no matrix-vector kernel for type '{}'",
                             GgmlTypeName(t));
    }
    formats.emplace_back(std::string(GgmlTypeName(t)), *f);
  }
  std::vector<std::string> names = {"default"};
  std::vector<std::vector<std::pair<std::string, std::string>>> settings = {{}};
  for (const std::string& s : options.settings) {
    FAK_ASSIGN_OR_RETURN(auto kv, ScopedSettings::Parse(s));
    names.push_back(s);
    settings.push_back(std::move(kv));
  }
  if (options.rounds < 1) return InvalidArgument("bench kernels: --rounds must be at least 1");
  if (options.batch < 1 || options.batch > kMaxBatch) {
    return InvalidArgument("bench kernels: --batch must be 1 to {}", kMaxBatch);
  }

  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return Unsupported("bench kernels --backend cuda: no CUDA device");
  }
  cudaStream_t stream = nullptr;
  FAK_RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream"));
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } stream_guard{stream};
  Events ev;
  FAK_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&ev.start), "creating an event"));
  FAK_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&ev.stop), "creating an event"));
  // The roofline fak bench sets decode against: the backend's device-to-device copy.
  double copy_gbs = 0;
  {
    FAK_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateCudaBackend({.device = device}));
    FAK_ASSIGN_OR_RETURN(copy_gbs, backend->MeasureBandwidth(0.5));
  }
  fmt::print(out, "device: {} ({} multiprocessors, L2 {:.0f} MiB); device copy bandwidth {:.0f} GB/s\n",
             prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1048576.0, copy_gbs);
  {
    LaunchCosts lc;
    const cudaError_t e = MeasureLaunchCosts(stream, std::min(options.min_seconds, 0.2), &lc);
    if (e != cudaSuccess) {  // a yardstick beside the products: say so and go on with them
      cudaGetLastError();
      fmt::print(out, "launch costs: not measured ({})\n", cudaGetErrorString(e));
    } else {
      fmt::print(
          out,
          "launch costs: a kernel that does nothing, in a graph of 256: {:.2f} us plain, {:.2f} us with "
          "dependent launch ({} blocks); {:.2f} / {:.2f} us ({} blocks); a grid-wide barrier inside one "
          "kernel of {} resident blocks: {:.2f} us\n",
          lc.plain_us, lc.pdl_us, lc.sms, lc.plain8_us, lc.pdl8_us, 8 * lc.sms, lc.sms, lc.barrier_us);
    }
  }
  fmt::print(out, "{} activation row{} per product; weights cycled through copies larger than 4x L2\n\n",
             options.batch, options.batch == 1 ? "" : "s");
  fmt::print(out, "| shape | type | MB | setting | round | us | GB/s | of copy bw | TOPS | bits |\n");
  fmt::print(out, "|---|---|---:|---|---:|---:|---:|---:|---:|---|\n");

  std::vector<std::string> differ;  // the settings whose outputs are not the default's, named at the end
  std::mt19937 rng(20261206);
  for (const Shape& shape : shapes) {
    for (const auto& [type_name, format] : formats) {
      DeviceBuffers mem;
      int64_t set_bytes = 0;
      for (int64_t r : shape.rows)
        set_bytes += r * (QBytes(format, shape.cols) + 2 * ScaleCount(format, shape.cols));
      const int64_t copies = std::clamp<int64_t>(
          (4 * static_cast<int64_t>(prop.l2CacheSize) + set_bytes - 1) / set_bytes, 1, 256);
      if (copies * set_bytes > (int64_t{6} << 30)) {
        return OutOfRange("shape {}: {} copies of {} MB do not fit the bench's 6 GiB", shape.name, copies,
                          set_bytes / 1000000);
      }
      // Copy 0 from the host, the rest copied on the device; every copy's matrices in one job.
      std::vector<MatVecJob> jobs(static_cast<size_t>(copies));
      const int64_t total_rows = [&] {
        int64_t t = 0;
        for (int64_t r : shape.rows) t += r;
        return t;
      }();
      const int64_t n = options.batch;
      FAK_ASSIGN_OR_RETURN(float* y, mem.Alloc<float>(static_cast<size_t>(total_rows * n) * 4, "outputs"));
      for (size_t m = 0; m < shape.rows.size(); ++m) {
        const int64_t rows = shape.rows[m];
        std::vector<uint8_t> hq;
        std::vector<uint16_t> hd;
        FillHost(format, rows, shape.cols, &rng, &hq, &hd);
        const int64_t y_off = [&] {
          int64_t o = 0;
          for (size_t i = 0; i < m; ++i) o += shape.rows[i];
          return o;
        }();
        for (int64_t c = 0; c < copies; ++c) {
          FAK_ASSIGN_OR_RETURN(auto* q, mem.Alloc<uint8_t>(hq.size(), "weights"));
          uint16_t* d = nullptr;
          if (!hd.empty()) {
            FAK_ASSIGN_OR_RETURN(d, mem.Alloc<uint16_t>(hd.size() * 2, "scales"));
          }
          const MatVecJob& first = jobs[0];
          FAK_RETURN_IF_ERROR(
              CudaStatus(c == 0 ? cudaMemcpy(q, hq.data(), hq.size(), cudaMemcpyHostToDevice)
                                : cudaMemcpy(q, first.w[m].q, hq.size(), cudaMemcpyDeviceToDevice),
                         "uploading weights"));
          if (d != nullptr) {
            FAK_RETURN_IF_ERROR(
                CudaStatus(c == 0 ? cudaMemcpy(d, hd.data(), hd.size() * 2, cudaMemcpyHostToDevice)
                                  : cudaMemcpy(d, first.w[m].d, hd.size() * 2, cudaMemcpyDeviceToDevice),
                           "uploading scales"));
          }
          MatVecJob& job = jobs[static_cast<size_t>(c)];
          job.count = static_cast<int>(m + 1);
          job.w[m] = DeviceMatrix{format, rows, shape.cols, q, d};
          job.out[m] = MatVecOut{y + y_off * n, rows, nullptr, nullptr, 0};
        }
      }
      // The activation rows: f32 for the float formats, their int8 shadow for the quantized ones.
      std::vector<float> hx(static_cast<size_t>(n * shape.cols)),
          hxd(static_cast<size_t>(n * shape.cols / 32));
      std::vector<int8_t> hxq(static_cast<size_t>(n * shape.cols));
      std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
      for (float& v : hx) v = uni(rng);
      for (int8_t& v : hxq) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
      for (float& v : hxd) v = 0.01f * (1.0f + uni(rng));
      FAK_ASSIGN_OR_RETURN(float* x, mem.Alloc<float>(hx.size() * 4, "activations"));
      FAK_ASSIGN_OR_RETURN(int8_t * xq, mem.Alloc<int8_t>(hxq.size(), "activations"));
      FAK_ASSIGN_OR_RETURN(float* xd, mem.Alloc<float>(hxd.size() * 4, "activations"));
      FAK_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice), "upload"));
      FAK_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpy(xq, hxq.data(), hxq.size(), cudaMemcpyHostToDevice), "upload"));
      FAK_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpy(xd, hxd.data(), hxd.size() * 4, cudaMemcpyHostToDevice), "upload"));

      // One graph per setting: launches through the copies, at least 64.
      const int64_t launches = std::max<int64_t>(64, copies);
      std::vector<cudaGraphExec_t> execs(settings.size(), nullptr);
      struct ExecGuard {
        std::vector<cudaGraphExec_t>* e;
        ~ExecGuard() {
          for (cudaGraphExec_t g : *e)
            if (g != nullptr) cudaGraphExecDestroy(g);
        }
      } exec_guard{&execs};
      std::vector<std::vector<float>> outputs(settings.size());
      for (size_t s = 0; s < settings.size(); ++s) {
        const ScopedSettings scoped(settings[s]);
        // The output of one launch, for the bit comparison between settings.
        FAK_RETURN_IF_ERROR(CudaStatus(
            MatVec(jobs[0], x, Q8Act{xq, xd, GroupFor(jobs[0].w[0].format)}, n, stream), "a product"));
        outputs[s].resize(static_cast<size_t>(total_rows * n));
        FAK_RETURN_IF_ERROR(CudaStatus(
            cudaMemcpyAsync(outputs[s].data(), y, outputs[s].size() * 4, cudaMemcpyDeviceToHost, stream),
            "reading the outputs"));
        FAK_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream), "a product"));
        cudaGraph_t graph = nullptr;
        FAK_RETURN_IF_ERROR(CudaStatus(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                                       "capturing a graph"));
        cudaError_t launch = cudaSuccess;
        for (int64_t i = 0; i < launches && launch == cudaSuccess; ++i)
          launch = MatVec(jobs[static_cast<size_t>(i % copies)], x,
                          Q8Act{xq, xd, GroupFor(jobs[0].w[0].format)}, n, stream);
        const cudaError_t end = cudaStreamEndCapture(stream, &graph);
        FAK_RETURN_IF_ERROR(CudaStatus(launch, "a product in a graph"));
        FAK_RETURN_IF_ERROR(CudaStatus(end, "capturing a graph"));
        const cudaError_t inst = cudaGraphInstantiate(&execs[s], graph, 0);
        cudaGraphDestroy(graph);
        FAK_RETURN_IF_ERROR(CudaStatus(inst, "instantiating a graph"));
      }
      for (int round = 1; round <= options.rounds; ++round) {
        for (size_t s = 0; s < settings.size(); ++s) {
          FAK_ASSIGN_OR_RETURN(double ms, TimeGraph(execs[s], stream, ev, options.min_seconds));
          const double us = ms * 1e3 / static_cast<double>(launches);
          const double gbs = static_cast<double>(set_bytes) / (us * 1e-6) * 1e-9;
          // Multiply-adds counted twice, as the tensor-core figures are.
          const double tops = 2.0 * static_cast<double>(total_rows * shape.cols * n) / (us * 1e-6) * 1e-12;
          const bool same = std::memcmp(outputs[s].data(), outputs[0].data(), outputs[0].size() * 4) == 0;
          fmt::print(out, "| {} | {} | {:.1f} | {} | {} | {:.2f} | {:.0f} | {:.1f}% | {:.1f} | {} |\n",
                     shape.name, type_name, static_cast<double>(set_bytes) / 1e6, names[s], round, us, gbs,
                     100.0 * gbs / copy_gbs, tops,
                     s == 0 ? "reference"
                     : same ? "same"
                            : "DIFFER");
          std::fflush(out);
          if (s > 0 && !same && round == 1) {
            size_t i = 0;
            while (i < outputs[0].size() && std::memcmp(&outputs[s][i], &outputs[0][i], 4) == 0) ++i;
            differ.push_back(fmt::format("{} {} '{}' (first at output {}: {} against {})", shape.name,
                                         type_name, names[s], i, outputs[s][i], outputs[0][i]));
          }
        }
      }
    }
  }
  if (!differ.empty()) {
    std::string all;
    for (const std::string& d : differ) all += (all.empty() ? "" : "; ") + d;
    return Internal("settings that give other bits than the default: {}", all);
  }
  return Status::Ok();
}

}  // namespace fak::cuda
