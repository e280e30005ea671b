#include "bench/model_bench.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/matmul.h"     // MatMul, MakeQuantMatrix, MakePackedQuantMatrix
#include "backends/cpu/packed.h"     // PackMatrix, PackedBytes
#include "backends/cpu/test_data.h"  // MakeRandomMatrix
#include "bench/huge_buffer.h"       // HugeBuffer
#include "core/thread_pool.h"        // ThreadPool, DefaultThreadCount
#include "core/timer.h"              // Timer

namespace fak::bench {
namespace {

struct MatrixSpec {
  const char* name;
  int64_t rows, cols;
  GgmlType type;
};

// Qwen2.5-1.5B: d_model 1536, d_ffn 8960, 28 layers, 12 query / 2 key-value heads of 128, vocabulary
// 151936 with the output tied to the embedding. For q4_k_m, attn_v and ffn_down take q6_k in the
// layers llama.cpp's Q4_K_M recipe gives more bits (the first and last eighth, and every third between)
// and the tied output is q6_k; everything else is q4_k.
std::vector<MatrixSpec> Qwen25_1_5B(const std::string& quant) {
  const int64_t d = 1536, ffn = 8960, kv = 256, vocab = 151936, n_layer = 28;
  const bool q8 = quant == "q8_0";
  const GgmlType base = q8 ? GgmlType::kQ8_0 : GgmlType::kQ4_K;
  std::vector<MatrixSpec> m;
  for (int64_t i = 0; i < n_layer; ++i) {
    const bool more = i < n_layer / 8 || i >= 7 * n_layer / 8 || (i - n_layer / 8) % 3 == 2;
    const GgmlType wide = q8 ? GgmlType::kQ8_0 : more ? GgmlType::kQ6_K : GgmlType::kQ4_K;
    m.push_back({"attn_q", d, d, base});
    m.push_back({"attn_k", kv, d, base});
    m.push_back({"attn_v", kv, d, wide});
    m.push_back({"attn_output", d, d, base});
    m.push_back({"ffn_gate", ffn, d, base});
    m.push_back({"ffn_up", ffn, d, base});
    m.push_back({"ffn_down", d, ffn, wide});
  }
  m.push_back({"output", vocab, d, q8 ? GgmlType::kQ8_0 : GgmlType::kQ6_K});
  return m;
}

size_t MatrixBytes(const MatrixSpec& s, bool packed) {
  if (packed) return cpu::PackedBytes(s.type, s.rows, s.cols);
  return static_cast<size_t>(s.rows) * *GgmlRowBytes(s.type, static_cast<uint64_t>(s.cols));
}

// Wall seconds of one run and whether every thread had the CPU throughout (>= 95% of wall x threads).
struct Rep {
  double seconds;
  bool clean;
};

template <typename Fn>
Status TimeRep(int threads, Fn&& fn, std::vector<Rep>* reps) {
  const double c0 = ProcessCpuSeconds();
  Timer t;
  FAK_RETURN_IF_ERROR(fn());
  const double s = t.Seconds(), cpu = ProcessCpuSeconds() - c0;
  reps->push_back({s, cpu >= 0.95 * s * threads});
  return Status::Ok();
}

// "best X ms (clean|contended), median Y ms, N of M clean"
struct Summary {
  double best, median;
  bool best_clean;
  int clean;
};
Summary Summarize(const std::vector<Rep>& reps) {
  std::vector<double> all, clean;
  for (const Rep& r : reps) {
    all.push_back(r.seconds);
    if (r.clean) clean.push_back(r.seconds);
  }
  std::sort(all.begin(), all.end());
  std::sort(clean.begin(), clean.end());
  Summary s;
  s.best_clean = !clean.empty();
  s.best = s.best_clean ? clean.front() : all.front();
  s.median = s.best_clean ? clean[clean.size() / 2] : all[all.size() / 2];
  s.clean = static_cast<int>(clean.size());
  return s;
}

}  // namespace

Status RunModelBench(const ModelBenchOptions& o) {
  if (o.geometry != "qwen2.5-1.5b") return InvalidArgument("bench model: unknown geometry '{}'", o.geometry);
  if (o.quant != "q8_0" && o.quant != "q4_k_m")
    return InvalidArgument("bench model: quant '{}' (q8_0, q4_k_m)", o.quant);
  if (o.prefill_tokens < 1 || o.decode_reps < 1 || o.prefill_reps < 1)
    return InvalidArgument("bench model: empty run");
  const std::vector<MatrixSpec> specs = Qwen25_1_5B(o.quant);
  const int threads = o.threads > 0 ? o.threads : DefaultThreadCount();
  ThreadPool pool(threads);

  // One arena, every matrix 64-byte aligned, filled by tiling a packed (or plain) random 256-row tile.
  std::vector<size_t> offset;
  size_t total = 0;
  for (const MatrixSpec& s : specs) {
    offset.push_back(total);
    total += (MatrixBytes(s, o.packed) + 63) / 64 * 64;
  }
  HugeBuffer arena(total);
  if (arena.data() == nullptr) return Internal("bench model: cannot map {} bytes", total);
  std::vector<cpu::QuantMatrix> mats;
  for (size_t i = 0; i < specs.size(); ++i) {
    const MatrixSpec& s = specs[i];
    const cpu::RandomMatrix tile =
        cpu::MakeRandomMatrix(s.type, 256, s.cols, 40 + static_cast<uint32_t>(i % 7), false);
    std::vector<uint8_t> src = tile.data;
    if (o.packed) {
      src.assign(cpu::PackedBytes(tile.type, 256, s.cols), 0);
      FAK_RETURN_IF_ERROR(cpu::PackMatrix(s.type, tile.data.data(), 256, s.cols, src.data()));
    }
    uint8_t* dst = arena.data() + offset[i];
    const size_t bytes = MatrixBytes(s, o.packed);
    for (size_t off = 0; off < bytes; off += src.size())
      std::memcpy(dst + off, src.data(), std::min(src.size(), bytes - off));
    const auto make = o.packed ? cpu::MakePackedQuantMatrix : cpu::MakeQuantMatrix;
    FAK_ASSIGN_OR_RETURN(cpu::QuantMatrix m, make(s.type, dst, s.rows, s.cols));
    mats.push_back(m);
  }

  const int64_t T = o.prefill_tokens;
  std::vector<float> x(static_cast<size_t>(T) * 8960), y(static_cast<size_t>(T) * 151936);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) % 2001) * 1e-3f - 1.0f;
  // One forward pass: every layer matrix over n tokens, the output over the last token only.
  auto pass = [&](int64_t n) -> Status {
    for (size_t i = 0; i + 1 < mats.size(); ++i)
      FAK_RETURN_IF_ERROR(cpu::MatMul(mats[i], x.data(), n, y.data(), pool));
    return cpu::MatMul(mats.back(), x.data(), 1, y.data(), pool);
  };
  FAK_RETURN_IF_ERROR(pass(1));  // warm-up: page faults, thread start
  std::vector<Rep> tg, pp;
  for (int r = 0; r < o.decode_reps; ++r)
    FAK_RETURN_IF_ERROR(TimeRep(
        threads, [&] { return pass(1); }, &tg));
  for (int r = 0; r < o.prefill_reps; ++r)
    FAK_RETURN_IF_ERROR(TimeRep(
        threads, [&] { return pass(T); }, &pp));
  const Summary d = Summarize(tg), p = Summarize(pp);
  std::fprintf(o.out, "fak bench model: %s %s, %s layout, %d threads, %zu matrices, %.0f MiB of weights\n",
               o.geometry.c_str(), o.quant.c_str(), o.packed ? "packed" : "gguf", threads, mats.size(),
               static_cast<double>(total) / (1 << 20));
  std::fprintf(o.out,
               "decode tg (matmuls of one token): best %.2f ms = %.1f tok/s (%.1f GB/s), median %.2f ms = "
               "%.1f tok/s; %d of %zu repetitions undisturbed%s\n",
               d.best * 1e3, 1 / d.best, static_cast<double>(total) / d.best * 1e-9, d.median * 1e3,
               1 / d.median, d.clean, tg.size(),
               d.best_clean ? "" : " (figures include time other processes took)");
  std::fprintf(o.out,
               "prefill pp%lld (matmuls): best %.1f ms = %.1f tok/s, median %.1f ms = %.1f tok/s; %d of %zu "
               "repetitions undisturbed%s\n",
               static_cast<long long>(T), p.best * 1e3, static_cast<double>(T) / p.best, p.median * 1e3,
               static_cast<double>(T) / p.median, p.clean, pp.size(),
               p.best_clean ? "" : " (figures include time other processes took)");
  return Status::Ok();
}

}  // namespace fak::bench
