// Perplexity over fixed-size chunks, computed the way llama-perplexity does: the text is tokenized
// once, cut into chunks of `ctx` tokens (the first token of each replaced by BOS when the model adds
// one), each chunk is run from an empty context, and only the second half of each chunk is scored
// (every position predicts the next token with at least ctx/2 tokens of context). With a base model,
// also the KL divergence of the model's next-token distributions from the base's and how often both
// pick the same top-1 token, at the same positions.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/status.h"
#include "engine/session.h"

namespace fak {

struct PerplexityOptions {
  int64_t ctx = 512;
  int64_t max_chunks = 0;  // 0: every whole chunk of the text
  int32_t bos = -1;        // >= 0: the first token of each chunk becomes this (the model adds BOS)
  // After each chunk: chunks done, chunks in all, the running perplexity.
  std::function<void(int64_t, int64_t, double)> progress;
  // The logits of every scored position, in order (a dump for comparison with another engine).
  std::function<Status(std::span<const float>)> on_scored_logits;
};

struct PerplexityResult {
  int64_t ctx = 0;
  int64_t chunks = 0;
  int64_t scored = 0;  // positions scored
  double ppl = 0;
  double ppl_err = 0;  // standard error, as llama-perplexity reports it
  std::vector<double> chunk_ppl;
  // With a base model.
  bool has_base = false;
  double base_ppl = 0;
  double kl_mean = 0;  // mean KL(base || model) per position, nats
  double kl_err = 0;
  double kl_max = 0;
  double top1_agreement = 0;  // fraction of positions where both argmaxes agree
};

Result<PerplexityResult> ComputePerplexity(Session& model, const std::vector<int32_t>& tokens,
                                           const PerplexityOptions& options, Session* base = nullptr);

}  // namespace fak
