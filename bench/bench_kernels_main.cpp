// fak_bench_kernels: the kernel benchmark as a standalone binary (`fak bench kernels` runs the same).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "backends/cpu/kernels.h"  // HasKernels
#include "bench/kernel_bench.h"    // RunKernelBench
#include "bench/model_bench.h"     // RunModelBench
#include "quant/ggml_type.h"       // GgmlTypeFromName

int main(int argc, char** argv) {
  fak::bench::KernelBenchOptions o;
  fak::bench::ModelBenchOptions mo;
  bool model = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fak_bench_kernels: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-t" || a == "--threads")
      o.threads = mo.threads = std::atoi(next());
    else if (a == "--model")
      model = true, mo.geometry = next();
    else if (a == "--quant")
      mo.quant = next();
    else if (a == "--gguf-layout")
      mo.packed = false;
    else if (a == "--pp")
      mo.prefill_tokens = std::atoll(next());
    else if (a == "--reps")
      mo.decode_reps = std::atoi(next());
    else if (a == "--cols")
      o.cols = std::atoll(next());
    else if (a == "--rows")
      o.matmul_rows = std::atoll(next());
    else if (a == "--tokens")
      o.matmul_tokens = std::atoll(next());
    else if (a == "--seconds")
      o.min_seconds = std::atof(next());
    else if (a == "--format") {
      const std::string f = next();
      const std::optional<fak::GgmlType> type = fak::GgmlTypeFromName(f);
      if (type && fak::cpu::HasKernels(*type)) {
        o.types.push_back(*type);
      } else {
        std::fprintf(stderr, "fak_bench_kernels: unknown format %s (f16, bf16, q8_0, q4_k, q6_k, f32)\n",
                     f.c_str());
        return 2;
      }
    } else {
      std::fprintf(
          stderr,
          "usage: fak_bench_kernels [-t N] [--format F]... [--cols N] [--rows N] [--tokens N] [--seconds S]\n"
          "       fak_bench_kernels --model qwen2.5-1.5b [--quant q8_0|q4_k_m] [--gguf-layout] [--pp N]\n"
          "                         [--reps N] [-t N]\n"
          "FAK_ISA=scalar|avx2|avx512|neon forces a kernel level.\n");
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  const fak::Status s = model ? fak::bench::RunModelBench(mo) : fak::bench::RunKernelBench(o);
  if (!s.ok()) {
    std::fprintf(stderr, "fak_bench_kernels: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
