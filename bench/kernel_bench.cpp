#include "bench/kernel_bench.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <string>

#include "backends/cpu/kernels.h"    // Kernels, KernelsFor, KernelSlot, ActivationRowBytes
#include "backends/cpu/packed.h"     // PackMatrix, PackActivations, PackedBytes
#include "backends/cpu/test_data.h"  // MakeRandomMatrix, MakeRandomActivations
#include "bench/huge_buffer.h"       // HugeBuffer
#include "core/cpu_features.h"       // GetCpuFeatures
#include "core/thread_pool.h"        // ThreadPool, DefaultThreadCount
#include "core/timer.h"              // Timer

namespace fak::bench {
namespace {

// The machine may be shared: a repetition is "clean" when the process got CPU time for all its threads
// during the whole wall time (>= 95%), i.e. no thread was descheduled. TimeBest reports the best clean
// repetition (the best of all when none was clean, counted in g_contended).
int g_threads = 1;
int g_measurements = 0, g_contended = 0;

// Runs fn repeatedly for at least min_seconds (after one warm-up call); returns the best seconds.
template <typename Fn>
double TimeBest(double min_seconds, Fn&& fn) {
  fn();
  double best = 1e30, best_clean = 1e30, total = 0;
  int reps = 0;
  while (total < min_seconds || reps < 3 || (best_clean == 1e30 && total < 4 * min_seconds)) {
    const double c0 = ProcessCpuSeconds();
    Timer t;
    fn();
    const double s = t.Seconds();
    const double cpu = ProcessCpuSeconds() - c0;
    best = std::min(best, s);
    if (cpu >= 0.95 * s * g_threads) best_clean = std::min(best_clean, s);
    total += s;
    ++reps;
  }
  ++g_measurements;
  if (best_clean == 1e30) ++g_contended;
  return best_clean < 1e30 ? best_clean : best;
}

// Streaming read of the whole buffer split across the pool; 8 independent sums keep loads in flight.
uint64_t ReadSlice(const uint8_t* p, size_t bytes) {
  const uint64_t* q = reinterpret_cast<const uint64_t*>(p);
  const size_t n = bytes / 8;
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    s0 += q[i] ^ q[i + 4], s1 += q[i + 1] ^ q[i + 5], s2 += q[i + 2] ^ q[i + 6], s3 += q[i + 3] ^ q[i + 7];
  }
  return s0 + s1 + s2 + s3;
}

double MeasureReadBandwidth(ThreadPool& pool, size_t bytes, double min_seconds) {
  HugeBuffer buf(bytes);
  if (buf.data() == nullptr) return 0;
  pool.ParallelFor(static_cast<int64_t>(bytes), 4096,
                   [&](int64_t b, int64_t e) { std::memset(buf.data() + b, 1, static_cast<size_t>(e - b)); });
  std::vector<uint64_t> sink(pool.size());
  const double s = TimeBest(min_seconds, [&] {
    pool.Run([&](int i, int n) {
      const size_t b = bytes * i / n / 64 * 64, e = bytes * (i + 1) / n / 64 * 64;
      sink[i] += ReadSlice(buf.data() + b, e - b);
    });
  });
  return static_cast<double>(bytes) / s * 1e-9;
}

// A plain streaming read of `bytes` at p, split across the pool like the kernels split rows.
void ReadAll(ThreadPool& pool, const uint8_t* p, size_t bytes, std::vector<uint64_t>& sink) {
  pool.Run([&](int i, int n) {
    const size_t b = bytes * i / n / 64 * 64, e = bytes * (i + 1) / n / 64 * 64;
    sink[i] += ReadSlice(p + b, e - b);
  });
}

// On a shared machine the ceiling drifts with the neighbours' load, so a kernel is timed in rounds
// alternating with a streaming read of the very same bytes; returns the best seconds of each.
template <typename Fn>
void TimePairedWithRead(ThreadPool& pool, const uint8_t* p, size_t bytes, double min_seconds, Fn&& kernel,
                        double* read_s, double* kernel_s) {
  std::vector<uint64_t> sink(pool.size());
  *read_s = *kernel_s = 1e30;
  for (int round = 0; round < 4; ++round) {
    *read_s = std::min(*read_s, TimeBest(min_seconds / 8, [&] { ReadAll(pool, p, bytes, sink); }));
    *kernel_s = std::min(*kernel_s, TimeBest(min_seconds / 4, kernel));
  }
}

double MeasureInt8Peak(ThreadPool& pool, const cpu::KernelTable& k, double min_seconds) {
  const int64_t iters = 1 << 22;
  std::vector<int64_t> macs(pool.size());
  const double s =
      TimeBest(min_seconds, [&] { pool.Run([&](int i, int) { macs[i] = k.int8_peak(iters); }); });
  int64_t total = 0;
  for (int64_t m : macs) total += m;
  return 2.0 * static_cast<double>(total) / s * 1e-9;  // one multiply-add = 2 ops
}

// The pool's cost of one parallel call: seconds per Run of an empty job (every thread woken, the
// caller waiting for all), and per ParallelForDynamic over 8,960 rows in grains of 16 with nothing to do
// (the shape of a decode step's largest products: the chunks are claimed from one shared counter). A
// decode step makes about 7 parallel calls per layer.
struct PoolCost {
  double run = 0, dynamic = 0;
};
PoolCost MeasurePoolCost(ThreadPool& pool, double min_seconds) {
  constexpr int kCalls = 256;
  PoolCost c;
  c.run = TimeBest(min_seconds,
                   [&] {
                     for (int i = 0; i < kCalls; ++i) pool.Run([](int, int) {});
                   }) /
          kCalls;
  std::atomic<int64_t> sink{0};
  c.dynamic = TimeBest(min_seconds,
                       [&] {
                         for (int i = 0; i < kCalls; ++i) {
                           pool.ParallelForDynamic(8960, 16, [&](int64_t b, int64_t e) {
                             if (e - b > 8960) sink.fetch_add(1, std::memory_order_relaxed);
                           });
                         }
                       }) /
              kCalls;
  return c;
}

bool SameBits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// Fills `dst` (rows of row_bytes) by repeating a smaller random matrix: generation stays fast and the
// data is still not compressible by any cache.
void FillByTiling(const cpu::RandomMatrix& tile, uint8_t* dst, int64_t rows) {
  const size_t tile_bytes = tile.data.size();
  const size_t total = static_cast<size_t>(rows) * tile.row_bytes;
  for (size_t off = 0; off < total; off += tile_bytes) {
    std::memcpy(dst + off, tile.data.data(), std::min(tile_bytes, total - off));
  }
}

}  // namespace

int64_t LastLevelCacheBytes() {
  int64_t best = 0;
  for (int idx = 0; idx < 8; ++idx) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx);
    std::ifstream level(dir + "/level"), size(dir + "/size");
    int lv = 0;
    std::string sz;
    if (!(level >> lv) || !(size >> sz)) continue;
    int64_t bytes = std::atoll(sz.c_str());
    if (!sz.empty() && (sz.back() == 'K' || sz.back() == 'k')) bytes <<= 10;
    if (!sz.empty() && (sz.back() == 'M' || sz.back() == 'm')) bytes <<= 20;
    best = std::max(best, bytes);
  }
  return best;
}

Status RunKernelBench(const KernelBenchOptions& o) {
  FILE* out = o.out;
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<ThreadPool> started, ThreadPool::Start(o.threads));
  ThreadPool& pool = *started;
  const int threads = pool.size();
  if (o.cols <= 0 || o.cols % 256 != 0)
    return InvalidArgument("bench kernels: cols {} must be a multiple of 256", o.cols);
  if (o.matmul_rows <= 0 || o.matmul_tokens <= 0) return InvalidArgument("bench kernels: empty matmul shape");
  g_threads = threads;
  g_measurements = g_contended = 0;
  const cpu::KernelTable& k = cpu::Kernels();
  const cpu::KernelTable& ref = *cpu::KernelsFor(cpu::Isa::kScalar);
  const int64_t llc = LastLevelCacheBytes();
  const int64_t big = std::max<int64_t>(4 * llc, int64_t{128} << 20);
  std::vector<GgmlType> types = o.types;
  if (types.empty()) {
    types = {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K,
             GgmlType::kF16,  GgmlType::kBF16, GgmlType::kF32};
  }
  for (GgmlType t : types) {
    if (!cpu::HasKernels(t)) return InvalidArgument("bench kernels: no kernels for {}", GgmlTypeName(t));
  }

  std::fprintf(out, "fak bench kernels: isa %s, %d threads, cpu \"%s\" (%s)\n",
               std::string(cpu::IsaName(k.isa)).c_str(), threads, GetCpuFeatures().model_name.c_str(),
               GetCpuFeatures().ToString().c_str());
  std::fprintf(out, "last-level cache %.1f MiB; matrix-vector weights are >= %.0f MiB (4x LLC), huge pages\n",
               static_cast<double>(llc) / (1 << 20), static_cast<double>(big) / (1 << 20));
  const double bw = o.matvec ? MeasureReadBandwidth(pool, static_cast<size_t>(big) * 2, o.min_seconds) : 0;
  const double peak = MeasureInt8Peak(pool, k, o.min_seconds);
  if (o.matvec) {
    std::fprintf(out, "measured read bandwidth: %.1f GB/s (streaming read of %.0f MiB, %d threads)\n", bw,
                 static_cast<double>(big) * 2 / (1 << 20), threads);
  }
  std::fprintf(
      out,
      "measured int8 peak:      %.0f GOPS, %.0f per thread (register-only %s dot loop; 1 multiply-add "
      "= 2 ops)\n\n",
      peak, peak / threads, std::string(cpu::IsaName(k.isa)).c_str());
  if (threads > 1) {
    const PoolCost pc = MeasurePoolCost(pool, o.min_seconds / 4);
    std::fprintf(out,
                 "thread pool, %d threads: %.2f us a parallel call with an empty job, %.2f us a dynamic "
                 "split of 8,960 rows in 16-row grains\n\n",
                 threads, pc.run * 1e6, pc.dynamic * 1e6);
  }

  if (o.matvec) {
    std::fprintf(
        out,
        "matrix-vector (decode): time to stream the whole matrix once; GB/s = weight bytes / time;\n"
        "read GB/s = a plain streaming read of the same buffer, timed in alternation with the kernel\n");
    std::fprintf(out, "%-9s %-14s %8s %8s %8s %8s %7s %7s\n", "format", "shape", "MiB", "us", "GB/s", "read",
                 "% bw", "% read");
  }
  auto row = [&](const std::string& name, const std::string& shape, size_t bytes, double s, double read_s) {
    const double gbs = static_cast<double>(bytes) / s * 1e-9,
                 read = static_cast<double>(bytes) / read_s * 1e-9;
    std::fprintf(out, "%-9s %-14s %8.1f %8.0f %8.1f %8.1f %6.0f%% %6.0f%%\n", name.c_str(), shape.c_str(),
                 static_cast<double>(bytes) / (1 << 20), s * 1e6, gbs, read, 100 * gbs / bw,
                 100 * gbs / read);
  };
  for (GgmlType f : o.matvec ? types : std::vector<GgmlType>{}) {
    const int fi = cpu::KernelSlot(f);
    const cpu::RandomMatrix tile = cpu::MakeRandomMatrix(f, 256, o.cols, 7 + fi, /*special=*/false);
    const int64_t rows = (big / static_cast<int64_t>(tile.row_bytes) + 255) / 256 * 256;
    const size_t bytes = static_cast<size_t>(rows) * tile.row_bytes;
    HugeBuffer w(bytes);
    if (w.data() == nullptr) return Internal("bench kernels: cannot map {} bytes", bytes);
    FillByTiling(tile, w.data(), rows);
    const auto act = cpu::MakeRandomActivations(f, 1, o.cols, 11 + fi, false);
    std::vector<float> y(rows), yr(256);
    // Validate on the first tile of rows before timing.
    k.matvec[fi](w.data(), tile.row_bytes, o.cols, act.data(), y.data(), 0, 256);
    ref.matvec[fi](w.data(), tile.row_bytes, o.cols, act.data(), yr.data(), 0, 256);
    if (!SameBits(y.data(), yr.data(), 256)) {
      return Internal("bench kernels: {} matvec differs from the scalar reference", GgmlTypeName(f));
    }
    double s, read_s;
    TimePairedWithRead(
        pool, w.data(), bytes, o.min_seconds,
        [&] {
          pool.ParallelFor(rows, 16, [&](int64_t r0, int64_t r1) {
            k.matvec[fi](w.data(), tile.row_bytes, o.cols, act.data(), y.data(), r0, r1);
          });
        },
        &read_s, &s);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(o.cols);
    row(std::string(GgmlTypeName(f)), shape, bytes, s, read_s);
    if (!cpu::HasPackedLayout(f) || k.packed[fi] == nullptr) continue;
    // The packed layout: a 256-row tile packs into 16 whole groups, so tiling the packed bytes gives the
    // packed copy of the big matrix.
    std::vector<uint8_t> ptile(cpu::PackedBytes(f, 256, o.cols));
    FAK_RETURN_IF_ERROR(cpu::PackMatrix(f, tile.data.data(), 256, o.cols, ptile.data()));
    const size_t pbytes = cpu::PackedBytes(f, rows, o.cols);
    for (size_t off = 0; off < pbytes; off += ptile.size()) {
      std::memcpy(w.data() + off, ptile.data(), std::min(ptile.size(), pbytes - off));
    }
    std::vector<uint8_t> pact(cpu::PackedActivationBytes(f, o.cols, 1));
    cpu::PackActivations(f, act.data(), 0, o.cols, 1, pact.data());
    k.packed[fi](w.data(), o.cols, pact.data(), 1, y.data(), 0, 0, 256);
    if (!SameBits(y.data(), yr.data(), 256)) {
      return Internal("bench kernels: packed {} matvec differs from the scalar reference", GgmlTypeName(f));
    }
    double sp, read_sp;
    TimePairedWithRead(
        pool, w.data(), pbytes, o.min_seconds,
        [&] {
          pool.ParallelFor(rows, cpu::kPackRows, [&](int64_t r0, int64_t r1) {
            k.packed[fi](w.data(), o.cols, pact.data(), 1, y.data(), 0, r0, r1);
          });
        },
        &read_sp, &sp);
    row(std::string(GgmlTypeName(f)) + " pk", shape, pbytes, sp, read_sp);
  }

  std::fprintf(
      out,
      "\nmatrix-matrix (prefill): %lld tokens; ops = 2 x rows x cols x tokens; activations quantized "
      "beforehand\n",
      static_cast<long long>(o.matmul_tokens));
  std::fprintf(out, "%-9s %-20s %10s %9s %8s\n", "format", "shape x tokens", "ms", "GOPS", "% peak");
  for (GgmlType f : types) {
    const int fi = cpu::KernelSlot(f);
    const cpu::RandomMatrix w = cpu::MakeRandomMatrix(f, o.matmul_rows, o.cols, 21 + fi, false);
    const int64_t nt = o.matmul_tokens;
    const auto act = cpu::MakeRandomActivations(f, nt, o.cols, 31 + fi, false);
    const size_t stride = cpu::ActivationRowBytes(f, o.cols);
    std::vector<float> y(static_cast<size_t>(nt * o.matmul_rows)), yr(static_cast<size_t>(nt * 32));
    k.matmul[fi](w.data.data(), w.row_bytes, o.cols, act.data(), stride, nt, y.data(), o.matmul_rows, 0, 32);
    ref.matmul[fi](w.data.data(), w.row_bytes, o.cols, act.data(), stride, nt, yr.data(), 32, 0, 32);
    for (int64_t t = 0; t < nt; ++t) {
      if (!SameBits(y.data() + t * o.matmul_rows, yr.data() + t * 32, 32)) {
        return Internal("bench kernels: {} matmul differs from the scalar reference", GgmlTypeName(f));
      }
    }
    const double s = TimeBest(o.min_seconds, [&] {
      pool.ParallelFor(o.matmul_rows, 16, [&](int64_t r0, int64_t r1) {
        k.matmul[fi](w.data.data(), w.row_bytes, o.cols, act.data(), stride, nt, y.data(), o.matmul_rows, r0,
                     r1);
      });
    });
    const double gops = 2.0 * static_cast<double>(o.matmul_rows) * static_cast<double>(o.cols) *
                        static_cast<double>(nt) / s * 1e-9;
    const std::string shape =
        std::to_string(o.matmul_rows) + "x" + std::to_string(o.cols) + " x " + std::to_string(nt);
    std::fprintf(out, "%-9s %-20s %10.2f %9.0f %7.0f%%\n", std::string(GgmlTypeName(f)).c_str(),
                 shape.c_str(), s * 1e3, gops, 100 * gops / peak);
    if (!cpu::HasPackedLayout(f) || k.packed[fi] == nullptr) continue;
    std::vector<uint8_t> wp(cpu::PackedBytes(f, o.matmul_rows, o.cols));
    FAK_RETURN_IF_ERROR(cpu::PackMatrix(f, w.data.data(), o.matmul_rows, o.cols, wp.data()));
    std::vector<uint8_t> pact(cpu::PackedActivationBytes(f, o.cols, nt));
    cpu::PackActivations(f, act.data(), stride, o.cols, nt, pact.data());
    std::fill(y.begin(), y.end(), 0.0f);
    k.packed[fi](wp.data(), o.cols, pact.data(), nt, y.data(), o.matmul_rows, 0, 32);
    for (int64_t t = 0; t < nt; ++t) {
      if (!SameBits(y.data() + t * o.matmul_rows, yr.data() + t * 32, 32)) {
        return Internal("bench kernels: packed {} matmul differs from the scalar reference", GgmlTypeName(f));
      }
    }
    // Row groups claimed dynamically, as the engine's matmul does ("pk"), and one contiguous range per
    // thread ("pk st").
    for (bool dynamic : {true, false}) {
      const double sp = TimeBest(o.min_seconds, [&] {
        auto fn = [&](int64_t r0, int64_t r1) {
          k.packed[fi](wp.data(), o.cols, pact.data(), nt, y.data(), o.matmul_rows, r0, r1);
        };
        if (dynamic) {
          pool.ParallelForDynamic(o.matmul_rows, cpu::kPackRows, fn);
        } else {
          pool.ParallelFor(o.matmul_rows, cpu::kPackRows, fn);
        }
      });
      const double gopsp = 2.0 * static_cast<double>(o.matmul_rows) * static_cast<double>(o.cols) *
                           static_cast<double>(nt) / sp * 1e-9;
      std::fprintf(out, "%-9s %-20s %10.2f %9.0f %7.0f%%\n",
                   (std::string(GgmlTypeName(f)) + (dynamic ? " pk" : " pk st")).c_str(), shape.c_str(),
                   sp * 1e3, gopsp, 100 * gopsp / peak);
    }
  }
  std::fprintf(out,
               "\n%d of %d timings had no repetition in which all %d threads ran undisturbed (load from "
               "other processes); clean repetitions were used for the rest\n",
               g_contended, g_measurements, threads);
  std::fprintf(out,
               "%% bw = GB/s / measured read bandwidth; %% peak = GOPS / measured int8 peak (for f16/bf16 "
               "the int8 peak is only a yardstick)\n");
  return Status::Ok();
}

}  // namespace fak::bench
