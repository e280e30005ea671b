#include "bench/quality.h"

#include <gtest/gtest.h>

namespace fak::bench {
namespace {

ArmRun MakeRun(const std::string& name, std::vector<std::vector<int32_t>> tokens, bool logits) {
  ArmRun r;
  r.name = name;
  r.exposes_tokens = true;
  r.exposes_logits = logits;
  for (size_t i = 0; i < tokens.size(); ++i) {
    RequestSample s;
    s.prompt_index = static_cast<int64_t>(i);
    s.tokens = tokens[i];
    if (logits) s.first_logits = {1.0f, 2.0f, 3.0f, static_cast<float>(i)};
    r.requests.push_back(s);
  }
  return r;
}

TEST(Quality, IdenticalSequencesAndLogitsPass) {
  ArmRun ref = MakeRun("ref", {{1, 2, 3}, {4, 5, 6}}, true);
  ArmRun arm = MakeRun("arm", {{1, 2, 3}, {4, 5, 6}}, true);
  const QualityResult q = EvaluateQuality(arm, ref);
  EXPECT_EQ(q.verdict, "pass");
  EXPECT_EQ(q.doc["schema"], "fak.bench.quality.v1");
  EXPECT_EQ(q.doc["policy"]["name"], "strict-token-parity");
  EXPECT_EQ(q.doc["policy"]["version"], 1);
  EXPECT_EQ(q.doc["summary"]["token_matches"], 2);
  EXPECT_EQ(q.doc["summary"]["logits_compared"], 2);
  EXPECT_NEAR(q.doc["prompts"][0]["cosine"].get<double>(), 1.0, 1e-12);
  EXPECT_EQ(VerdictFromEvidence(q.doc), "pass");
  EXPECT_EQ(EvaluateQuality(ref, ref).verdict, "reference");
}

TEST(Quality, OneDifferentTokenFailsAndIsLocated) {
  ArmRun ref = MakeRun("ref", {{1, 2, 3}, {4, 5, 6}}, false);
  ArmRun arm = MakeRun("arm", {{1, 2, 3}, {4, 9, 6}}, false);
  const QualityResult q = EvaluateQuality(arm, ref);
  EXPECT_EQ(q.verdict, "fail");
  EXPECT_EQ(q.doc["prompts"][1]["tokens_match"], false);
  EXPECT_EQ(q.doc["prompts"][1]["first_mismatch"], 1);
  EXPECT_EQ(q.doc["prompts"][0]["first_mismatch"], -1);
  EXPECT_FALSE(q.doc["prompts"][0].contains("cosine"));  // no logits on either side
  EXPECT_EQ(VerdictFromEvidence(q.doc), "fail");
}

TEST(Quality, LowCosineFailsEvenWithEqualTokens) {
  ArmRun ref = MakeRun("ref", {{1, 2}}, true);
  ArmRun arm = MakeRun("arm", {{1, 2}}, true);
  arm.requests[0].first_logits = {3.0f, 2.0f, 1.0f, 0.0f};
  const QualityResult q = EvaluateQuality(arm, ref);
  EXPECT_EQ(q.verdict, "fail");
  EXPECT_EQ(q.doc["prompts"][0]["cosine_pass"], false);
  EXPECT_LT(q.doc["summary"]["min_cosine"].get<double>(), kCosineMin);
}

TEST(Quality, StatesWithoutComparison) {
  ArmRun ref = MakeRun("ref", {{1}}, true);
  ArmRun thru = MakeRun("llama.cpp", {}, false);
  thru.exposes_tokens = false;
  EXPECT_EQ(EvaluateQuality(thru, ref).verdict, "not-measured");
  ArmRun failed = MakeRun("x", {}, false);
  failed.Fail("crashed");
  EXPECT_EQ(EvaluateQuality(failed, ref).verdict, "arm-failed");
  EXPECT_EQ(EvaluateQuality(ref, failed).verdict, "no-reference");
}

TEST(Quality, EvidenceOverridesAStatedPass) {
  ArmRun ref = MakeRun("ref", {{1, 2}}, false);
  ArmRun arm = MakeRun("arm", {{1, 2}}, false);
  QualityResult q = EvaluateQuality(arm, ref);
  q.doc["prompts"][0]["tokens"][1] = 7;  // edited evidence, verdict left at pass
  EXPECT_EQ(VerdictFromEvidence(q.doc), "fail");
}

TEST(Quality, Cosine) {
  EXPECT_NEAR(Cosine({1, 0}, {0, 1}), 0.0, 1e-12);
  EXPECT_NEAR(Cosine({1, 2}, {2, 4}), 1.0, 1e-12);
  EXPECT_EQ(Cosine({1, 2}, {1}), 0.0);
}

}  // namespace
}  // namespace fak::bench
