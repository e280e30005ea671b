// Round to nearest, ties to even, without a libm call: at the baseline x86-64 flags (no SSE4.1)
// std::nearbyint is a function call per value, which dominated the Q4_K range search.
#pragma once

#if defined(__FAST_MATH__)
#error "quant/round.h relies on IEEE addition; do not build with -ffast-math"
#endif

namespace fak {

// Equals std::nearbyint(v) in the default rounding mode for |v| < 2^22: adding 1.5 * 2^23 moves v to
// where the float spacing is 1, so the addition itself rounds (ties to even), and subtracting it back
// is exact. Larger magnitudes come back as large values of the same sign, so a following clamp to a
// small range gives the same result as with std::nearbyint; NaN stays NaN.
inline float RoundHalfEven(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (v + kMagic) - kMagic;          // the project builds without -ffast-math, which would fold this to v
}

// RoundHalfEven as an int, saturated to +-2^22 (NaN gives -2^22), so that non-finite or huge inputs
// from a hostile file fall into a caller's clamp instead of an undefined conversion.
inline int NearestInt(float v) {
  constexpr float kLimit = 4194304.0f;  // 2^22
  const float r = RoundHalfEven(v);
  if (!(r > -kLimit)) return -4194304;
  if (r > kLimit) return 4194304;
  return static_cast<int>(r);
}

// NearestInt clamped to [lo, hi], computed in float so that loops over a block vectorize: the same
// result for every input (rounding comes first; NaN gives lo).
inline int RoundClamped(float v, float lo, float hi) {
  const float r = RoundHalfEven(v);
  return static_cast<int>(!(r >= lo) ? lo : (r > hi ? hi : r));
}

}  // namespace fak
