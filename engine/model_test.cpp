// The forward pass against llama.cpp's own outputs on the llamacpp-tiny GGUF files: last-position
// logits (cosine) and teacher-forced agreement with its 16 greedy tokens, for F16, Q8_0, Q4_K_M and Q6_K.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/session.h"

namespace fak {
namespace {

const char* kDir = "../shared/fixtures/llamacpp-tiny";

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

// llama.cpp's CPU flash attention accumulates V in f16; on quantized models the next matmul quantizes
// its activations to 8 bits, which turns those last-digit differences into a few flipped quanta, so on
// a random tiny model (top-1/top-2 margins of hundredths of a logit) greedy paths part after a near-tie
// and whole-continuation equality measures luck, not correctness. The test therefore teacher-forces:
// fak is shown llama.cpp's recorded continuation and must pick llama.cpp's token at each of the 80
// steps (5 prompts x 16), except at near-ties, and the margin by which it prefers its own token at
// every disagreement is bounded.
//
// The bounds come from llama.cpp's own noise floor: the same tool run with flash attention off, scored
// against the recorded continuations (flash attention on), on llama.cpp commit 0c1e570 (2 threads):
//   f16 80/80, q8_0 75/80 (largest margin at a disagreement 0.054), q4_k_m 78/80 (0.019),
//   q6_k 76/80 (0.055).
// fak must agree at least as often as llama.cpp with itself, less two steps (one such comparison is a
// single draw of that noise), and never prefer its own token by more than 0.1 logits (about twice the
// floor's largest margin; a wrong kernel or layout gives margins of whole logits and agreement far
// below). Measured for fak when this test was written: 75/80 (0.033), 78/80 (0.048), 74/80 (0.095).
// The f16 model runs without activation quantization and must agree at every step.
struct Case {
  const char* type;
  double min_cosine;
  int min_forced_agreement;  // of 80 teacher-forced steps
  float max_margin;          // fak's top logit minus its logit for llama.cpp's token, at a disagreement
};

class TinyLlama : public ::testing::TestWithParam<Case> {};

TEST_P(TinyLlama, MatchesLlamaCpp) {
  const Case c = GetParam();
  auto model = LoadModel(std::string(kDir) + "/tiny-llama-" + c.type + ".gguf");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto rt = Runtime::Create(**model, RuntimeOptions{.backend = {.threads = 2}});
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  auto session = Session::Create(**rt);
  ASSERT_TRUE(session.ok());
  int agree = 0, steps = 0;
  float worst_margin = 0.0f;
  for (int p = 1; p <= 5; ++p) {
    SCOPED_TRACE(std::string(c.type) + " prompt " + std::to_string(p));
    std::ifstream in(std::string(kDir) + "/expected/" + c.type + "-p" + std::to_string(p) + ".json");
    auto j = nlohmann::json::parse(in);
    std::vector<int32_t> prompt = j["prompt_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> want = j["greedy_ids"].get<std::vector<int32_t>>();
    auto ref =
        ReadNpyF32(std::string(kDir) + "/expected/" + c.type + "-p" + std::to_string(p) + ".logits.npy");
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    Session& s = **session;
    s.Truncate(0);
    std::vector<float> logits(static_cast<size_t>(s.vocab_size()));
    ASSERT_TRUE(s.Prefill(prompt, logits.data()).ok());
    EXPECT_GE(Cosine(logits, ref->data), c.min_cosine);
    for (size_t i = 0; i < want.size(); ++i) {
      const int32_t mine = Argmax(logits);
      ++steps;
      if (mine == want[i]) {
        ++agree;
      } else {
        const float margin = logits[static_cast<size_t>(mine)] - logits[static_cast<size_t>(want[i])];
        worst_margin = std::max(worst_margin, margin);
        EXPECT_LE(margin, c.max_margin)
            << "step " << i << ": fak picks " << mine << ", llama.cpp " << want[i];
      }
      ASSERT_TRUE(s.Step(want[i], logits.data()).ok());  // teacher forcing: continue with llama.cpp's token
    }
  }
  std::printf("%s: teacher-forced agreement %d/%d, largest margin at a disagreement %.4f\n", c.type, agree,
              steps, worst_margin);
  EXPECT_GE(agree, c.min_forced_agreement);
}

INSTANTIATE_TEST_SUITE_P(Types, TinyLlama,
                         ::testing::Values(Case{"f16", 0.9999, 80, 0.0f}, Case{"q8_0", 0.9995, 73, 0.1f},
                                           Case{"q4_k_m", 0.999, 76, 0.1f}, Case{"q6_k", 0.999, 74, 0.1f}),
                         [](const auto& info) { return std::string(info.param.type); });

TEST(Session, ChunkedPrefillEqualsOneShotAndDecode) {
  auto model = LoadModel(std::string(kDir) + "/tiny-llama-q8_0.gguf");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto rt = Runtime::Create(**model, RuntimeOptions{.max_sequences = 3, .backend = {.threads = 2}});
  ASSERT_TRUE(rt.ok());
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(100 + 37 * i);
  const size_t vocab = 32000;
  // One shot.
  auto a = Session::Create(**rt);
  std::vector<float> all(prompt.size() * vocab);
  ASSERT_TRUE((*a)->Prefill(prompt, all.data(), /*all_logits=*/true).ok());
  // Chunks of 7, and token by token: every position's logits must be identical bit for bit.
  auto b = Session::Create(**rt, SessionOptions{.prefill_chunk = 7});
  std::vector<float> chunked(prompt.size() * vocab);
  ASSERT_TRUE((*b)->Prefill(prompt, chunked.data(), true).ok());
  EXPECT_EQ(all, chunked);
  auto c = Session::Create(**rt);
  std::vector<float> one(vocab);
  for (size_t i = 0; i < prompt.size(); ++i) {
    ASSERT_TRUE((*c)->Step(prompt[i], one.data()).ok());
    ASSERT_EQ(0, std::memcmp(one.data(), &all[i * vocab], vocab * 4)) << "position " << i;
  }
}

TEST(Session, BadInputIsRejectedAndChangesNothing) {
  auto model = LoadModel(std::string(kDir) + "/tiny-llama-q8_0.gguf");
  ASSERT_TRUE(model.ok());
  auto rt = Runtime::Create(**model, RuntimeOptions{.max_context = 32, .backend = {.threads = 1}});
  ASSERT_TRUE(rt.ok());
  auto s = Session::Create(**rt);
  std::vector<float> logits(32000);
  std::vector<int32_t> too_long(33, 5);
  Status st = (*s)->Prefill(too_long, logits.data());
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("exceeds the context length 32"), std::string::npos) << st.message();
  std::vector<int32_t> bad_id = {1, 32000};
  st = (*s)->Prefill(bad_id, logits.data());
  EXPECT_NE(st.message().find("token id 32000"), std::string::npos) << st.message();
  EXPECT_EQ((*s)->position(), 0);
}

TEST(LoadModel, ErrorsNameTheProblem) {
  auto missing = LoadModel("/nonexistent/model.gguf");
  ASSERT_FALSE(missing.ok());
  auto vocab = LoadModel("../shared/fixtures/vocab/ggml-vocab-gpt-2.gguf");  // tokenizer only: no tensors
  ASSERT_FALSE(vocab.ok());
  EXPECT_NE(vocab.status().message().find("gpt2"), std::string::npos) << vocab.status().message();
}

}  // namespace
}  // namespace fak
