#include "backends/cpu/kernels.h"

#include <cstdlib>
#include <string>

#include "core/cpu_features.h"  // GetCpuFeatures
#include "core/log.h"
#include "quant/f16.h"
#include "quant/q8_0.h"
#include "quant/q8_k.h"

namespace fak::cpu {

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kNeon: return "neon";
  }
  return "?";
}

size_t ActivationRowBytes(GgmlType type, int64_t n) {
  switch (type) {
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kF32: return static_cast<size_t>(n) * sizeof(float);
    case GgmlType::kQ8_0: return static_cast<size_t>(n / kQK8_0) * sizeof(BlockQ8_0);
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K: return static_cast<size_t>(n / kQK_K) * sizeof(BlockQ8_K);
    default: return 0;
  }
}

void QuantizeActivations(GgmlType type, const float* x, void* out, int64_t n) {
  switch (type) {
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kF32:
      for (int64_t i = 0; i < n; ++i) static_cast<float*>(out)[i] = x[i];
      return;
    case GgmlType::kQ8_0: QuantizeRowQ8_0(x, static_cast<BlockQ8_0*>(out), n); return;
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K: QuantizeRowQ8_K(x, static_cast<BlockQ8_K*>(out), n); return;
    default: return;  // no kernels: callers have checked HasKernels
  }
}

namespace {

bool CpuCanRun(Isa isa) {
  const CpuFeatures& f = GetCpuFeatures();
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return f.avx2 && f.fma && f.f16c;
    case Isa::kAvx512: return f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni && f.f16c;
    case Isa::kNeon: return f.neon && f.dotprod;
  }
  return false;
}

const KernelTable* Compiled(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return ScalarKernels();
    case Isa::kAvx2: return Avx2Kernels();
    case Isa::kAvx512: return Avx512Kernels();
    case Isa::kNeon: return NeonKernels();
  }
  return nullptr;
}

const KernelTable& Choose() {
  const char* forced = std::getenv("FAK_ISA");
  if (forced != nullptr && *forced != '\0') {
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
      if (IsaName(isa) != forced) continue;
      if (const KernelTable* t = KernelsFor(isa)) return *t;
      FAK_LOG_WARN("FAK_ISA={}: not compiled in or not supported by this CPU; choosing automatically",
                   forced);
    }
    if (std::string(forced) != "scalar" && std::string(forced) != "avx2" && std::string(forced) != "avx512" &&
        std::string(forced) != "neon") {
      FAK_LOG_WARN("FAK_ISA={}: unknown level (want scalar, avx2, avx512 or neon)", forced);
    }
  }
  const std::vector<Isa> isas = AvailableIsas();
  return *KernelsFor(isas.back());
}

}  // namespace

const KernelTable* KernelsFor(Isa isa) { return CpuCanRun(isa) ? Compiled(isa) : nullptr; }

std::vector<Isa> AvailableIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kNeon, Isa::kAvx2, Isa::kAvx512}) {
    if (KernelsFor(isa) != nullptr) out.push_back(isa);
  }
  return out;
}

const KernelTable& Kernels() {
  static const KernelTable& table = Choose();
  return table;
}

}  // namespace fak::cpu
