#include "bench/quality.h"

#include <cmath>

namespace fak::bench {

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return 0;
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 0;
}

QualityResult EvaluateQuality(const ArmRun& arm, const ArmRun& ref) {
  QualityResult q;
  nlohmann::json prompts = nlohmann::json::array();
  int64_t matches = 0, compared_logits = 0;
  double min_cos = 2;
  std::string verdict;
  if (arm.status != "ok") {
    verdict = "arm-failed";
  } else if (&arm == &ref) {
    verdict = "reference";
  } else if (ref.status != "ok") {
    verdict = "no-reference";
  } else if (!arm.exposes_tokens || !ref.exposes_tokens) {
    verdict = "not-measured";
  }
  const bool compare = verdict.empty();
  for (const auto& rs : arm.requests) {
    nlohmann::json e = {{"prompt_index", rs.prompt_index}, {"tokens", rs.tokens}};
    if (compare) {
      const RequestSample* other = nullptr;
      for (const auto& x : ref.requests) {
        if (x.prompt_index == rs.prompt_index) other = &x;
      }
      if (other == nullptr) {
        e["reference_tokens"] = nullptr;
        e["tokens_match"] = false;
        e["first_mismatch"] = 0;
      } else {
        int64_t mismatch = -1;
        const size_t n = std::max(rs.tokens.size(), other->tokens.size());
        for (size_t i = 0; i < n && mismatch < 0; ++i) {
          if (i >= rs.tokens.size() || i >= other->tokens.size() || rs.tokens[i] != other->tokens[i]) {
            mismatch = static_cast<int64_t>(i);
          }
        }
        e["reference_tokens"] = other->tokens;
        e["tokens_match"] = mismatch < 0;
        e["first_mismatch"] = mismatch;
        matches += mismatch < 0;
        if (!rs.first_logits.empty() && !other->first_logits.empty()) {
          const double c = Cosine(rs.first_logits, other->first_logits);
          e["cosine"] = c;
          e["cosine_pass"] = c >= kCosineMin;
          min_cos = std::min(min_cos, c);
          ++compared_logits;
        }
      }
    }
    prompts.push_back(std::move(e));
  }
  if (compare) {
    verdict = "pass";
    if (arm.requests.size() != ref.requests.size()) verdict = "fail";
    for (const auto& e : prompts) {
      if (!e["tokens_match"].get<bool>() || (e.contains("cosine_pass") && !e["cosine_pass"].get<bool>())) {
        verdict = "fail";
      }
    }
  }
  q.verdict = verdict;
  q.doc = {{"schema", "fak.bench.quality.v1"},
           {"arm", arm.name},
           {"reference_arm", ref.name},
           {"policy",
            {{"name", kQualityPolicy},
             {"version", kQualityPolicyVersion},
             {"cosine_min", kCosineMin},
             {"logits_position", "first generated token"}}},
           {"verdict", verdict},
           {"summary",
            {{"prompts", arm.requests.size()},
             {"reference_prompts", ref.requests.size()},
             {"token_matches", matches},
             {"logits_compared", compared_logits},
             {"min_cosine", compared_logits > 0 ? nlohmann::json(min_cos) : nlohmann::json(nullptr)}}},
           {"prompts", prompts}};
  if (!compare) q.doc["summary"]["token_matches"] = nullptr;
  return q;
}

std::string VerdictFromEvidence(const nlohmann::json& q) {
  const std::string stated = q.value("verdict", "");
  if (stated != "pass" && stated != "fail") return stated;  // states without a comparison
  const auto& s = q["summary"];
  if (s.value("prompts", int64_t{-1}) != s.value("reference_prompts", int64_t{-2})) return "fail";
  for (const auto& e : q["prompts"]) {
    const bool match = e.contains("reference_tokens") && e["tokens"] == e["reference_tokens"];
    if (!match) return "fail";
    if (e.contains("cosine") && e["cosine"].get<double>() < q["policy"].value("cosine_min", kCosineMin)) {
      return "fail";
    }
  }
  return "pass";
}

}  // namespace fak::bench
