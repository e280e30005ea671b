// What the running CPU can execute. Filled once at start-up; kernels are chosen from it.
#pragma once

#include <string>

namespace fak {

struct CpuFeatures {
  // x86-64
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avxvnni = false;
  // arm64
  bool neon = false;
  bool dotprod = false;
  bool i8mm = false;

  std::string model_name;  // "AMD EPYC 9B45", from /proc/cpuinfo or cpuid brand string
  int logical_cores = 1;

  // "avx2 fma f16c avx512f avx512bw avx512vl avx512vnni avx512bf16"
  std::string ToString() const;
};

const CpuFeatures& GetCpuFeatures();

}  // namespace fak
