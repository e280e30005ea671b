#include "core/cpu_features.h"

#include <fstream>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace fak {
namespace {

#if defined(__x86_64__) || defined(__i386__)
uint64_t Xgetbv() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

void DetectX86(CpuFeatures& f) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  const bool osxsave = (c >> 27) & 1;
  const bool avx = (c >> 28) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  const uint64_t xcr0 = osxsave ? Xgetbv() : 0;
  const bool os_ymm = (xcr0 & 0x6) == 0x6;
  const bool os_zmm = (xcr0 & 0xE6) == 0xE6;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = avx && os_ymm && ((b >> 5) & 1);
    f.avx512f = os_zmm && ((b >> 16) & 1);
    f.avx512bw = os_zmm && ((b >> 30) & 1);
    f.avx512vl = os_zmm && ((b >> 31) & 1);
    f.avx512vnni = os_zmm && ((c >> 11) & 1);
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avxvnni = os_ymm && ((a >> 4) & 1);
    f.avx512bf16 = os_zmm && ((a >> 5) & 1);
  }
  if (!os_ymm) f.fma = f.f16c = false;
  unsigned brand[12] = {};
  if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000004) {
    for (unsigned i = 0; i < 3; ++i) {
      __get_cpuid(0x80000002 + i, &brand[i * 4], &brand[i * 4 + 1], &brand[i * 4 + 2], &brand[i * 4 + 3]);
    }
    std::string s(reinterpret_cast<const char*>(brand), 48);
    s = s.c_str();
    while (!s.empty() && s.back() == ' ') s.pop_back();
    while (!s.empty() && s.front() == ' ') s.erase(s.begin());
    f.model_name = s;
  }
}
#endif

#if defined(__aarch64__)
void DetectArm(CpuFeatures& f) {
  f.neon = true;  // mandatory in AArch64
#if defined(__linux__)
  unsigned long hw = getauxval(AT_HWCAP);
  unsigned long hw2 = getauxval(AT_HWCAP2);
  f.dotprod = (hw & HWCAP_ASIMDDP) != 0;
#ifdef HWCAP2_I8MM
  f.i8mm = (hw2 & HWCAP2_I8MM) != 0;
#else
  (void)hw2;
#endif
#endif
}
#endif

CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  DetectX86(f);
#endif
#if defined(__aarch64__)
  DetectArm(f);
#endif
  if (f.model_name.empty()) {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("model name", 0) == 0 || line.rfind("CPU part", 0) == 0) {
        auto p = line.find(':');
        if (p != std::string::npos) f.model_name = line.substr(p + 2);
        break;
      }
    }
  }
  unsigned n = std::thread::hardware_concurrency();
  f.logical_cores = n == 0 ? 1 : static_cast<int>(n);
  return f;
}

}  // namespace

std::string CpuFeatures::ToString() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512vnni, "avx512vnni");
  add(avx512bf16, "avx512bf16");
  add(avxvnni, "avxvnni");
  add(neon, "neon");
  add(dotprod, "dotprod");
  add(i8mm, "i8mm");
  return s.empty() ? "none" : s;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

}  // namespace fak
