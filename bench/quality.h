// Quality policy "strict-token-parity" v1: per prompt, the arm's greedy token sequence must equal
// the reference arm's; where both arms expose logits (fak arms), the logits at the first generated
// position must have cosine similarity >= 0.9999. The verdict and the per-prompt evidence form the
// arm's <arm>-quality.json.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bench/arm.h"

namespace fak::bench {

inline constexpr const char* kQualityPolicy = "strict-token-parity";
inline constexpr int kQualityPolicyVersion = 1;
inline constexpr double kCosineMin = 0.9999;

// Verdicts: "pass", "fail", "reference" (the arm is the reference), "arm-failed", "no-reference"
// (the reference arm failed), "not-measured" (either side exposes no tokens).
struct QualityResult {
  std::string verdict;
  nlohmann::json doc;  // the quality file (schema fak.bench.quality.v1)
};

QualityResult EvaluateQuality(const ArmRun& arm, const ArmRun& reference);

// The verdict the evidence of a quality file implies (what the validator checks it against).
std::string VerdictFromEvidence(const nlohmann::json& quality);

double Cosine(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace fak::bench
