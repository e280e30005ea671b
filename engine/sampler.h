// Token sampling: greedy, temperature, top-k, top-p, min-p, and repetition / presence / frequency
// penalties. Random draws come from a counter-based generator keyed by (seed, step), so a request's
// samples depend only on its seed and position, never on other requests or threads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <utility>
#include <vector>

#include "core/status.h"

namespace fak {

struct SamplingParams {
  float temperature = 0.0f;         // 0: greedy (argmax)
  int32_t top_k = 0;                // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off; keeps tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;  // 1: off; divides positive logits, multiplies negative ones
  float presence_penalty = 0.0f;    // subtracted once per token present in the window
  float frequency_penalty = 0.0f;   // subtracted per occurrence in the window
  int32_t penalty_window = 64;      // how many recent tokens the penalties look at
  uint64_t seed = 0;
  // Added to a token's logit before penalties and sampling (OpenAI's logit_bias, llama.cpp's
  // --logit-bias); -infinity bans the token. Ids outside the vocabulary are ignored by the sampler:
  // callers check them against the vocabulary they know.
  std::vector<std::pair<int32_t, float>> logit_bias;

  Status Validate() const;  // names the bad field
};

// A uniform double in [0, 1) from (seed, counter): splitmix64 over a mixed key.
double CounterUniform(uint64_t seed, uint64_t counter);

class Sampler {
 public:
  explicit Sampler(SamplingParams params) : p_(params) {}

  // Picks the next token from `logits` (modified in place by penalties). `history` is the sequence
  // so far (prompt and output); `step` numbers the draw for the random generator.
  int32_t Sample(std::span<float> logits, std::span<const int32_t> history, uint64_t step);

 private:
  SamplingParams p_;
  std::vector<std::pair<float, int32_t>> cand_;
  std::vector<double> probs_;
};

int32_t Argmax(std::span<const float> logits);

}  // namespace fak
