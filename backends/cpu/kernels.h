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
#include <string_view>
#include <vector>

#include "backends/cpu/act.h"        // SiluMulFn
#include "backends/cpu/attention.h"  // AttendHeadFn

namespace fak::cpu {

// Weight formats with kernels. Activations are f32 for kF16/kBF16/kF32, Q8_0 blocks for kQ8_0 and
// Q8_K blocks for the k-quants, quantized per row with QuantizeActivations.
enum class WeightFormat : int { kF16 = 0, kBF16, kQ8_0, kQ4_K, kQ6_K, kF32 };
constexpr int kNumWeightFormats = 6;
std::string_view WeightFormatName(WeightFormat f);  // "f16", "bf16", "q8_0", "q4_k", "q6_k", "f32"

// Bytes of one activation row of n elements for weights of format f.
size_t ActivationRowBytes(WeightFormat f, int64_t n);
// Quantizes one activation row (n elements, a whole number of the format's blocks) into `out`.
void QuantizeActivations(WeightFormat f, const float* x, void* out, int64_t n);

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

struct KernelTable {
  Isa isa = Isa::kScalar;
  MatVecFn matvec[kNumWeightFormats] = {};
  MatMulFn matmul[kNumWeightFormats] = {};
  PackedMatMulFn packed[kNumWeightFormats] = {};  // null where the format has no packed layout
  bool packed_native[kNumWeightFormats] = {};     // packed[f] is this level's own SIMD kernel
  QuantizePackedFn quantize_packed[kNumWeightFormats] = {};
  Int8PeakFn int8_peak = nullptr;
  AttendHeadFn attend = nullptr;  // one query head over paged f16/f32 keys and values
  AttendGroupFn attend_group = nullptr;  // the query heads sharing one KV head, same bits per head
  SiluMulFn silu_mul = nullptr;   // SwiGLU: g = silu(g) * u
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
