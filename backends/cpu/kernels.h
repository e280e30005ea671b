// CPU kernel dispatch: one table of function pointers per instruction set, filled at start-up from the
// CPU's features, so one binary runs on any x86-64 or arm64 machine. FAK_ISA=scalar|avx2|avx512|neon
// forces a level (tests and benchmarks); a level the CPU cannot run falls back with a warning.
//
// Contract: every table computes exactly what the scalar reference in quant/ computes, bit for bit.
// Quantized formats accumulate each block in integers and combine scales in the reference's order;
// f16/bf16 follow the 16-lane order of VecDotF16F32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>
#include <vector>

#include "backends/cpu/act.h"        // SiluMulFn
#include "backends/cpu/attention.h"  // AttendHeadFn
#include "quant/ggml_type.h"         // GgmlType

namespace fak::cpu {

// The weight types with kernels, in the order of a KernelTable's arrays. Activations are f32 for
// f16/bf16/f32 weights, Q8_0 blocks for q8_0 and Q8_K blocks for the k-quants, quantized per row with
// QuantizeActivations.
inline constexpr GgmlType kKernelTypes[] = {GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                                            GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kF32};
constexpr int kNumKernelSlots = static_cast<int>(std::size(kKernelTypes));

// The index of `type` in a KernelTable's arrays; -1 for types without kernels.
constexpr int KernelSlot(GgmlType type) {
  for (int i = 0; i < kNumKernelSlots; ++i) {
    if (kKernelTypes[i] == type) return i;
  }
  return -1;
}
constexpr bool HasKernels(GgmlType type) { return KernelSlot(type) >= 0; }

// Bytes of one activation row of n elements for weights of `type`; 0 for types without kernels.
size_t ActivationRowBytes(GgmlType type, int64_t n);
// Quantizes one activation row (n elements, a whole number of the type's blocks) into `out`.
void QuantizeActivations(GgmlType type, const float* x, void* out, int64_t n);

// y[r] = row r of w (rows are row_bytes apart) . act, for r in [r0, r1). n is the row length.
using MatVecFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act, float* y,
                          int64_t r0, int64_t r1);
// y[t * ldy + r] = row r . activation row t, for r in [r0, r1) and t in [0, n_tokens); activation rows
// are act_stride bytes apart.
using MatMulFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n, const uint8_t* act,
                          size_t act_stride, int64_t n_tokens, float* y, int64_t ldy, int64_t r0, int64_t r1);

// The same over the packed layout of backends/cpu/packed.h: w is the first group of the matrix, act the
// block-major packed activations of n_tokens rows, and rows [r0, r1) are written (r0 a multiple of 16;
// the groups holding them are computed whole).
using PackedMatMulFn = void (*)(const uint8_t* w, int64_t n, const uint8_t* act, int64_t n_tokens, float* y,
                                int64_t ldy, int64_t r0, int64_t r1);

// Quantizes activation row t (n elements) into the packed kernels' block-major buffer of n_tokens rows,
// exactly as QuantizePackedActivations does.
using QuantizePackedFn = void (*)(const float* x, int64_t n, int64_t t, int64_t n_tokens, void* out);

enum class Isa : int { kScalar = 0, kAvx2, kAvx512, kNeon };
std::string_view IsaName(Isa isa);  // "scalar", "avx2", "avx512", "neon"

// Runs `iterations` rounds of int8 multiply-accumulates held in registers (the machine's int8 peak
// when every core runs it) and returns how many multiply-accumulates that was.
using Int8PeakFn = int64_t (*)(int64_t iterations);

// The per-type arrays are indexed by KernelSlot(type).
struct KernelTable {
  Isa isa = Isa::kScalar;
  MatVecFn matvec[kNumKernelSlots] = {};
  MatMulFn matmul[kNumKernelSlots] = {};
  PackedMatMulFn packed[kNumKernelSlots] = {};  // null where the type has no packed layout
  bool packed_native[kNumKernelSlots] = {};     // packed[s] is this level's own SIMD kernel
  QuantizePackedFn quantize_packed[kNumKernelSlots] = {};
  Int8PeakFn int8_peak = nullptr;
  AttendHeadFn attend = nullptr;         // one query head over paged f16/f32 keys and values
  AttendGroupFn attend_group = nullptr;  // the query heads sharing one KV head, same bits per head
  SiluMulFn silu_mul = nullptr;          // SwiGLU: g = silu(g) * u
};

// The table in use: the best level the CPU supports, or FAK_ISA's choice.
const KernelTable& Kernels();
// A specific level; nullptr when it is not compiled into this binary or the CPU cannot run it.
const KernelTable* KernelsFor(Isa isa);
// Every level this binary and CPU can run, scalar first.
std::vector<Isa> AvailableIsas();

// Per-ISA tables; defined in their own translation units, each compiled with its target flags.
const KernelTable* ScalarKernels();
const KernelTable* Avx2Kernels();    // nullptr on non-x86 builds
const KernelTable* Avx512Kernels();  // nullptr on non-x86 builds
const KernelTable* NeonKernels();    // nullptr on non-arm64 builds

}  // namespace fak::cpu
