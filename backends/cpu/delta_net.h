// Gated-DeltaNet (linear attention) and the small ops around it, over f32 activations. Each
// sequence's rows are processed in order and every value is reduced in a fixed order, so a row's
// result does not depend on the batch around it or on how its prompt was chunked.
#pragma once

#include <cstdint>

#include "ops/backend.h"  // DeltaNetSpec

namespace fak::cpu {

// Channels [c0, c1) of the causal depthwise convolution of one sequence's n rows of x (row stride
// conv_dim), in place, then SiLU. `window` holds the last conv_kernel - 1 inputs, (conv_kernel - 1,
// conv_dim), oldest first; it is read as the inputs before row 0 and left holding the last ones.
// w is (conv_dim, conv_kernel).
void DeltaNetConvChannels(const DeltaNetSpec& s, float* x, int64_t n, const float* w, float* window,
                          int64_t c0, int64_t c1);

// The gated delta rule of value head h over one sequence's n rows. x rows hold q | k | v (after the
// convolution, stride conv_dim); b and a rows (stride n_v_head) the beta and decay projections;
// state is the head's (k_dim, v_dim) S; out rows (stride n_v_head * v_dim) get the head's v_dim
// outputs. scratch holds 2 * k_dim + 2 * v_dim floats.
void DeltaNetHead(const DeltaNetSpec& s, int64_t h, const float* x, const float* b, const float* a, int64_t n,
                  float ssm_a, float dt_bias, float* state, float* out, float* scratch);

// y = x / rms(x) * w * silu(z) over n_rows rows of n (in place allowed).
void GatedRmsNorm(const float* x, const float* w, const float* z, float* y, int64_t n_rows, int64_t n,
                  float eps);

}  // namespace fak::cpu
