// The forward pass against HuggingFace transformers (tests/fixtures/hf, made by tools/oracle): on the
// bf16-weights path and the f32 path, argmax identical at every prompt position, logits cosine >= 0.9999
// at every position (rows rebuilt from the oracle's final hidden states) and the 16-token greedy
// continuation identical.
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
#include "quant/codec.h"

namespace fak {
namespace {

double Cosine(const float* a, const float* b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i)
    ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

// Every row of w as f32.
std::vector<float> DequantizedRows(const Weight& w) {
  std::vector<float> out(static_cast<size_t>(w.rows) * static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    EXPECT_TRUE(DequantizeRow(w.type, w.row(r), &out[static_cast<size_t>(r * w.cols)], w.cols).ok())
        << "row " << r;
  }
  return out;
}

// HF's logits row at one position, rebuilt as emb . h from its final hidden state (within 4e-7 of HF's
// stored rows, tests/fixtures/hf/README.md).
void RebuildLogits(const float* h, const std::vector<float>& emb, int64_t d, float* ref) {
  const size_t vocab = emb.size() / static_cast<size_t>(d);
  for (size_t v = 0; v < vocab; ++v) {
    float acc = 0;
    for (int64_t k = 0; k < d; ++k) acc += h[k] * emb[v * d + k];
    ref[v] = acc;
  }
}

struct OracleCase {
  const char* name;
  WeightQuant quant;
  bool kv_f32 = false;
};

class HfOracle : public ::testing::TestWithParam<OracleCase> {};

TEST_P(HfOracle, MatchesTransformers) {
  const OracleCase c = GetParam();
  const std::string dir = std::string("tests/fixtures/hf/") + c.name;
  std::ifstream in(dir + "/oracle.json");
  ASSERT_TRUE(in) << dir;
  auto oracle = nlohmann::json::parse(in);
  auto model = LoadModel(dir, LoadOptions{.quant = c.quant});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Model& m = **model;
  const size_t vocab = static_cast<size_t>(m.config.vocab_size);
  const int64_t d = m.config.d_model;
  // The tied embedding as f32, to rebuild HF's logits at every position from its hidden states.
  const std::vector<float> emb = DequantizedRows(m.Get("token_embd.weight"));
  auto rt = Runtime::Create(m, RuntimeOptions{.kv_f32 = c.kv_f32, .backend = {.threads = 2}});
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  auto session = Session::Create(**rt);
  ASSERT_TRUE(session.ok());
  double worst = 1.0;
  for (const auto& p : oracle["prompts"]) {
    SCOPED_TRACE(std::string(c.name) + " prompt " + p["name"].get<std::string>());
    auto ids = p["token_ids"].get<std::vector<int32_t>>();
    auto hidden = ReadNpyF32(dir + "/" + p["hidden_file"].get<std::string>());
    auto last = ReadNpyF32(dir + "/" + p["logits_file"].get<std::string>());
    ASSERT_TRUE(hidden.ok() && last.ok());
    Session& s = **session;
    s.Truncate(0);
    std::vector<float> logits(ids.size() * vocab);
    ASSERT_TRUE(s.Prefill(ids, logits.data(), /*all_logits=*/true).ok());
    auto argmax = p["argmax"].get<std::vector<int32_t>>();
    std::vector<float> ref(vocab);
    for (size_t t = 0; t < ids.size(); ++t) {
      RebuildLogits(&hidden->data[t * d], emb, d, ref.data());
      const float* got = &logits[t * vocab];
      const double cos = Cosine(got, ref.data(), vocab);
      worst = std::min(worst, cos);
      EXPECT_GE(cos, 0.9999) << "position " << t;
      EXPECT_EQ(Argmax(std::span<const float>(got, vocab)), argmax[t]) << "position " << t;
    }
    // The stored row of HF's own logits at the last position.
    EXPECT_GE(Cosine(&logits[(ids.size() - 1) * vocab], last->data.data(), vocab), 0.9999);
    // Greedy continuation.
    auto want = p["greedy"]["tokens"].get<std::vector<int32_t>>();
    std::vector<float> step(&logits[(ids.size() - 1) * vocab], &logits[ids.size() * vocab]);
    std::vector<int32_t> got;
    for (size_t i = 0; i < want.size(); ++i) {
      got.push_back(Argmax(step));
      ASSERT_TRUE(s.Step(got.back(), step.data()).ok());
    }
    EXPECT_EQ(got, want);
  }
  RecordProperty("worst_cosine", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, HfOracle,
    ::testing::Values(
        OracleCase{"llama3-tiny", WeightQuant::kKeep}, OracleCase{"llama3-tiny", WeightQuant::kF32},
        OracleCase{"qwen2-tiny", WeightQuant::kKeep}, OracleCase{"qwen2-tiny", WeightQuant::kF32},
        OracleCase{"qwen3-tiny", WeightQuant::kKeep}, OracleCase{"qwen3-tiny", WeightQuant::kF32},
        OracleCase{"qwen2-256", WeightQuant::kKeep}, OracleCase{"qwen2-256", WeightQuant::kF32},
        OracleCase{"llama3-tiny", WeightQuant::kF32, true},
        OracleCase{"qwen2-tiny", WeightQuant::kKeep, true}, OracleCase{"qwen35-tiny", WeightQuant::kKeep},
        OracleCase{"qwen35-tiny", WeightQuant::kF32}, OracleCase{"qwen35-tiny", WeightQuant::kF32, true},
        // Mixture of experts: f32 keys and values only. The f16 cache moves a query by ~1e-3,
        // and of this random model's ~1,600 routing decisions a few have top-2 margins that
        // small, so the expert picked flips and its output jumps (seen: cosine 0.968 and
        // another argmax at a position of the code prompt, bf16 and f32 weights alike).
        OracleCase{"qwen3next-tiny", WeightQuant::kKeep, true},
        OracleCase{"qwen3next-tiny", WeightQuant::kF32, true},
        OracleCase{"qwen35moe-tiny", WeightQuant::kKeep, true},
        OracleCase{"qwen35moe-tiny", WeightQuant::kF32, true}),
    [](const auto& info) {
      std::string n = std::string(info.param.name) + "_" + WeightQuantName(info.param.quant) +
                      (info.param.kv_f32 ? "_kv_f32" : "");
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

// The block-quantized paths (quantized at load from the bf16 checkpoint) against HF's float32 logits on
// qwen2-256, whose rows are long enough for Q8_0 and Q4_K: top-1 agreement over every prompt position
// and mean KL(HF || fak), against bounds with headroom over what was measured (docs/quant.md).
struct QuantCase {
  WeightQuant quant;
  bool kv_f32;
  double min_top1;  // fraction of positions whose argmax equals HF's
  double max_mean_kl;
  double max_kl;
};

class HfOracleQuantized : public ::testing::TestWithParam<QuantCase> {};

double KlDivergence(const float* ref, const float* got, size_t n) {
  const double mr = *std::max_element(ref, ref + n), mg = *std::max_element(got, got + n);
  double zr = 0, zg = 0;
  for (size_t i = 0; i < n; ++i) zr += std::exp(ref[i] - mr), zg += std::exp(got[i] - mg);
  const double lzr = std::log(zr) + mr, lzg = std::log(zg) + mg;
  double kl = 0;
  for (size_t i = 0; i < n; ++i) {
    const double lp = ref[i] - lzr, lq = got[i] - lzg;
    kl += std::exp(lp) * (lp - lq);
  }
  return kl;
}

TEST_P(HfOracleQuantized, TopOneAndKlWithinBounds) {
  const QuantCase c = GetParam();
  const std::string dir = "tests/fixtures/hf/qwen2-256";
  std::ifstream in(dir + "/oracle.json");
  ASSERT_TRUE(in) << dir;
  auto oracle = nlohmann::json::parse(in);
  auto exact = LoadModel(dir, LoadOptions{.quant = WeightQuant::kKeep});
  auto model = LoadModel(dir, LoadOptions{.quant = c.quant});
  ASSERT_TRUE(exact.ok() && model.ok()) << model.status().ToString();
  const Model& m = **model;
  const GgmlType want = c.quant == WeightQuant::kQ8_0 ? GgmlType::kQ8_0 : GgmlType::kQ4_K;
  // --quant q4_k keeps the output projection at Q6_K, as llama.cpp's Q4_K mixes do.
  ASSERT_EQ(m.Get("output.weight").type, c.quant == WeightQuant::kQ8_0 ? GgmlType::kQ8_0 : GgmlType::kQ6_K);
  ASSERT_EQ(m.Get("blk.0.ffn_down.weight").type, want);
  const size_t vocab = static_cast<size_t>(m.config.vocab_size);
  const int64_t d = m.config.d_model;
  const std::vector<float> emb =
      DequantizedRows((*exact)->Get("token_embd.weight"));  // the checkpoint's own (bf16)
  auto rt = Runtime::Create(m, RuntimeOptions{.kv_f32 = c.kv_f32, .backend = {.threads = 2}});
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  auto session = Session::Create(**rt);
  ASSERT_TRUE(session.ok());
  int64_t positions = 0, agree = 0;
  double kl_sum = 0, kl_max = 0, cos_min = 1;
  std::vector<float> ref(vocab);
  for (const auto& p : oracle["prompts"]) {
    auto ids = p["token_ids"].get<std::vector<int32_t>>();
    auto hidden = ReadNpyF32(dir + "/" + p["hidden_file"].get<std::string>());
    ASSERT_TRUE(hidden.ok());
    auto argmax = p["argmax"].get<std::vector<int32_t>>();
    Session& s = **session;
    s.Truncate(0);
    std::vector<float> logits(ids.size() * vocab);
    ASSERT_TRUE(s.Prefill(ids, logits.data(), /*all_logits=*/true).ok());
    for (size_t t = 0; t < ids.size(); ++t) {
      RebuildLogits(&hidden->data[t * d], emb, d, ref.data());
      const float* got = &logits[t * vocab];
      ASSERT_EQ(Argmax(ref), argmax[t]);  // the rebuilt row is HF's
      const double kl = KlDivergence(ref.data(), got, vocab);
      kl_sum += kl;
      kl_max = std::max(kl_max, kl);
      cos_min = std::min(cos_min, Cosine(got, ref.data(), vocab));
      agree += Argmax(std::span<const float>(got, vocab)) == argmax[t];
      ++positions;
    }
  }
  const double top1 = static_cast<double>(agree) / static_cast<double>(positions);
  const double mean_kl = kl_sum / static_cast<double>(positions);
  std::printf("%s%s: %lld positions, top-1 %.4f (%lld), mean KL %.3g, max KL %.3g, min cosine %.6f\n",
              WeightQuantName(c.quant), c.kv_f32 ? " (f32 KV)" : "", static_cast<long long>(positions), top1,
              static_cast<long long>(agree), mean_kl, kl_max, cos_min);
  RecordProperty("top1", std::to_string(top1));
  RecordProperty("mean_kl", std::to_string(mean_kl));
  EXPECT_GE(top1, c.min_top1);
  EXPECT_LE(mean_kl, c.max_mean_kl);
  EXPECT_LE(kl_max, c.max_kl);
}

INSTANTIATE_TEST_SUITE_P(Quantized, HfOracleQuantized,
                         // Measured (177 positions): Q8_0 top-1 0.960, mean KL 7.8e-4, max 1.8e-3 (f32 KV:
                         // 0.949, 7.9e-4, 1.6e-3); Q4_K top-1 0.695, mean KL 0.060, max 0.133.
                         ::testing::Values(QuantCase{WeightQuant::kQ8_0, false, 0.92, 1.5e-3, 4e-3},
                                           QuantCase{WeightQuant::kQ8_0, true, 0.92, 1.5e-3, 4e-3},
                                           QuantCase{WeightQuant::kQ4_K, false, 0.60, 0.1, 0.25}),
                         [](const auto& info) {
                           return std::string(WeightQuantName(info.param.quant)) +
                                  (info.param.kv_f32 ? "_kv_f32" : "");
                         });

}  // namespace
}  // namespace fak
