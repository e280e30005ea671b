// Whole models through the CUDA backend: the HF oracle fixtures against transformers and the CPU path,
// a sequence decoded alone and inside a batch, graph replay against op-by-op launches, and the hybrid's
// recurrent layers. On a machine without a GPU each test says "skipped: no GPU".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_test_util.h"
#include "core/npy.h"
#include "engine/model.h"
#include "engine/runtime.h"
#include "engine/sampler.h"
#include "engine/session.h"

namespace fak::cuda_test {
namespace {

Result<std::unique_ptr<Model>> LoadFor(const std::string& path, WeightQuant quant, bool gpu) {
  return LoadModel(path, LoadOptions{.quant = quant, .layout = gpu ? &cuda::CudaWeightLayout() : nullptr});
}

double Cosine(const float* a, const float* b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i)
    ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

// Whole models on the HF oracle fixtures: the CUDA path's logits at every prompt position against the
// CPU path's (cosine >= 0.9999), HF's argmax at every position, and HF's 16-token greedy continuation.
TEST(CudaModel, HfFixturesMatchTransformersAndTheCpuPath) {
  SKIP_WITHOUT_GPU();
  for (const char* name : {"llama3-tiny", "qwen2-tiny", "qwen3-tiny", "qwen2-256", "qwen35-tiny"}) {
    for (WeightQuant q : {WeightQuant::kKeep, WeightQuant::kF32}) {
      SCOPED_TRACE(std::string(name) + " " + WeightQuantName(q));
      const std::string dir = std::string("tests/fixtures/hf/") + name;
      std::ifstream in(dir + "/oracle.json");
      ASSERT_TRUE(in);
      const auto oracle = nlohmann::json::parse(in);
      auto mc = LoadFor(dir, q, false);
      auto mg = LoadFor(dir, q, true);
      ASSERT_TRUE(mc.ok() && mg.ok()) << mg.status().ToString();
      auto rc = Runtime::Create(**mc, RuntimeOptions{.backend = {.threads = 2}});
      auto rg = Runtime::Create(**mg, RuntimeOptions{.backend = {.name = "cuda"}});
      ASSERT_TRUE(rc.ok() && rg.ok()) << rg.status().ToString();
      auto sc = Session::Create(**rc);
      auto sg = Session::Create(**rg);
      ASSERT_TRUE(sc.ok() && sg.ok());
      const size_t vocab = static_cast<size_t>((*mc)->config.vocab_size);
      for (const auto& p : oracle["prompts"]) {
        const auto ids = p["token_ids"].get<std::vector<int32_t>>();
        std::vector<float> lc(ids.size() * vocab), lg(ids.size() * vocab);
        (*sc)->Truncate(0);
        (*sg)->Truncate(0);
        ASSERT_TRUE((*sc)->Prefill(ids, lc.data(), true).ok());
        const Status s = (*sg)->Prefill(ids, lg.data(), true);
        ASSERT_TRUE(s.ok()) << s.ToString();
        const auto argmax = p["argmax"].get<std::vector<int32_t>>();
        for (size_t t = 0; t < ids.size(); ++t) {
          EXPECT_GE(Cosine(&lg[t * vocab], &lc[t * vocab], vocab), 0.9999) << "position " << t;
          EXPECT_EQ(Argmax(std::span<const float>(&lg[t * vocab], vocab)), argmax[t]) << "position " << t;
        }
        const auto want = p["greedy"]["tokens"].get<std::vector<int32_t>>();
        std::vector<float> step(&lg[(ids.size() - 1) * vocab], &lg[ids.size() * vocab]);
        std::vector<int32_t> got;
        for (size_t i = 0; i < want.size(); ++i) {
          got.push_back(Argmax(step));
          ASSERT_TRUE((*sg)->Step(got.back(), step.data()).ok());
        }
        EXPECT_EQ(got, want);
      }
    }
  }
}

// The K-quant files of llamacpp-tiny through the CUDA backend against llama.cpp's own outputs, as
// engine/model_test.cpp checks the CPU path (its comment explains the bounds: llama.cpp's noise floor,
// teacher-forced agreement with its 16 greedy tokens after 5 prompts, the margin at a disagreement): the
// K-quant products read activations with one scale per 256 values (qblock.cuh), as llama.cpp's and fak's
// CPU paths do.
TEST(CudaModel, KQuantFilesMatchLlamaCpp) {
  SKIP_WITHOUT_GPU();
  const std::string dir = "../shared/fixtures/llamacpp-tiny";
  const struct {
    const char* type;
    double min_cosine;
    int min_forced_agreement;
    float max_margin;
  } cases[] = {{"q4_k_m", 0.999, 76, 0.1f}, {"q6_k", 0.999, 74, 0.1f}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.type);
    const std::string file = dir + "/tiny-llama-" + c.type + ".gguf";
    if (!std::ifstream(file).good()) {
      ADD_FAILURE() << file << " is missing";
      continue;
    }
    auto m = LoadFor(file, WeightQuant::kKeep, true);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto rt = Runtime::Create(**m, RuntimeOptions{.backend = {.name = "cuda"}});
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    auto session = Session::Create(**rt);
    ASSERT_TRUE(session.ok());
    int agree = 0, steps = 0;
    float worst = 0.0f;
    double worst_cos = 1.0;
    for (int p = 1; p <= 5; ++p) {
      const std::string base = dir + "/expected/" + c.type + "-p" + std::to_string(p);
      std::ifstream in(base + ".json");
      ASSERT_TRUE(in) << base << ".json is missing";
      const auto j = nlohmann::json::parse(in);
      const auto prompt = j["prompt_ids"].get<std::vector<int32_t>>();
      const auto want = j["greedy_ids"].get<std::vector<int32_t>>();
      auto ref = ReadNpyF32(base + ".logits.npy");
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      Session& s = **session;
      s.Truncate(0);
      std::vector<float> logits(static_cast<size_t>(s.vocab_size()));
      ASSERT_TRUE(s.Prefill(prompt, logits.data()).ok());
      const double cos = Cosine(logits.data(), ref->data.data(), logits.size());
      worst_cos = std::min(worst_cos, cos);
      EXPECT_GE(cos, c.min_cosine) << "prompt " << p;
      for (size_t i = 0; i < want.size(); ++i) {
        const int32_t mine = Argmax(std::span<const float>(logits));
        ++steps;
        if (mine == want[i]) {
          ++agree;
        } else {
          const float margin = logits[static_cast<size_t>(mine)] - logits[static_cast<size_t>(want[i])];
          worst = std::max(worst, margin);
          EXPECT_LE(margin, c.max_margin) << "prompt " << p << " step " << i;
        }
        ASSERT_TRUE(s.Step(want[i], logits.data()).ok());
      }
    }
    std::printf("%s on the GPU: cosine >= %.6f, teacher-forced agreement %d/%d, largest margin %.4f\n",
                c.type, worst_cos, agree, steps, worst);
    EXPECT_GE(agree, c.min_forced_agreement);
  }
}

// Batch invariance on the GPU: a sequence's logits, decoded step by step alone, are bit-identical to
// the same sequence decoded inside a batch of 8 with other prompts, prefilled in other chunkings.
TEST(CudaModel, DecodeIsBitIdenticalAloneAndInABatchOfEight) {
  SKIP_WITHOUT_GPU();
  // llama.cpp's Q4_K_M mix (q4_k and q6_k matrices) as it is, and requantized to q8_0 at load; with the
  // row ops as their own launches and inside the one-row products (the batch's steps launch them apart);
  // the one-row products by the whole-row kernel on every matrix (FAK_CUDA_MATVEC_ROWS=1; by default
  // these small matrices take the previous kernel); the batch's prompts by the GEMM with four or eight
  // warps a tile (FAK_CUDA_GEMM_WARPS).
  const struct {
    const char* tails;
    const char* rows;
    const char* gemm_warps;
  } modes[] = {{"0", "1", "4"}, {"0", "0", "8"}, {"1", "0", "4"}};
  for (const auto& mode : modes) {
    for (WeightQuant quant : {WeightQuant::kKeep, WeightQuant::kQ8_0}) {
      const ScopedEnv tails_env("FAK_CUDA_TAILS", mode.tails), rows_env("FAK_CUDA_MATVEC_ROWS", mode.rows),
          gemm_env("FAK_CUDA_GEMM_WARPS", mode.gemm_warps);
      SCOPED_TRACE(std::string(WeightQuantName(quant)) + " tails " + mode.tails + " rows kernel " +
                   mode.rows + " GEMM warps " + mode.gemm_warps);
      auto m = LoadFor("../shared/fixtures/llamacpp-tiny/tiny-llama-q4_k_m.gguf", quant, true);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      auto rt = Runtime::Create(
          **m, RuntimeOptions{.max_context = 128, .max_sequences = 8, .backend = {.name = "cuda"}});
      ASSERT_TRUE(rt.ok()) << rt.status().ToString();
      const int64_t vocab = (*m)->config.vocab_size;
      std::mt19937 rng(42);
      std::vector<std::vector<int32_t>> prompts(8);
      for (size_t i = 0; i < prompts.size(); ++i) {
        prompts[i].resize(5 + 3 * i);
        for (auto& t : prompts[i]) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
      }
      const int steps = 12;
      // Alone: prefill in one pass, then greedy decode; every step's logits kept.
      std::vector<float> alone;
      std::vector<int32_t> alone_tokens;
      {
        auto s = Session::Create(**rt);
        ASSERT_TRUE(s.ok());
        std::vector<float> l(static_cast<size_t>(vocab));
        ASSERT_TRUE((*s)->Prefill(prompts[0], l.data()).ok());
        for (int k = 0; k < steps; ++k) {
          alone.insert(alone.end(), l.begin(), l.end());
          alone_tokens.push_back(Argmax(l));
          ASSERT_TRUE((*s)->Step(alone_tokens.back(), l.data()).ok());
        }
      }
      // In a batch of 8: every sequence's prompt in one forward (sequence 0's in chunks of 3 first),
      // then every step decodes all eight together.
      std::vector<std::unique_ptr<Sequence>> seqs;
      for (int i = 0; i < 8; ++i) {
        auto s = (*rt)->NewSequence();
        ASSERT_TRUE(s.ok());
        seqs.push_back(std::move(*s));
      }
      std::vector<std::vector<float>> logits(8, std::vector<float>(static_cast<size_t>(vocab)));
      for (size_t at = 0; at + 3 < prompts[0].size(); at += 3) {
        const std::vector<int32_t> chunk(prompts[0].begin() + static_cast<int64_t>(at),
                                         prompts[0].begin() + static_cast<int64_t>(at) + 3);
        const SeqWork w{.seq = seqs[0].get(), .tokens = chunk};
        ASSERT_TRUE((*rt)->Forward(std::span<const SeqWork>(&w, 1)).ok());
      }
      std::vector<SeqWork> work;
      const size_t done0 = seqs[0]->size();
      std::vector<std::vector<int32_t>> rest(8);
      for (int i = 0; i < 8; ++i) {
        rest[i].assign(prompts[i].begin() + static_cast<int64_t>(i == 0 ? done0 : 0), prompts[i].end());
        work.push_back({.seq = seqs[i].get(), .tokens = rest[i], .logits = logits[i].data()});
      }
      ASSERT_TRUE((*rt)->Forward(work).ok());
      std::vector<int32_t> next(8);
      for (int k = 0; k < steps; ++k) {
        EXPECT_EQ(std::memcmp(logits[0].data(), &alone[static_cast<size_t>(k * vocab)],
                              static_cast<size_t>(vocab) * 4),
                  0)
            << "step " << k;
        work.clear();
        for (int i = 0; i < 8; ++i) {
          next[i] = i == 0 ? alone_tokens[static_cast<size_t>(k)] : Argmax(logits[i]);
          work.push_back({.seq = seqs[i].get(),
                          .tokens = std::span<const int32_t>(&next[i], 1),
                          .logits = logits[i].data()});
        }
        ASSERT_TRUE((*rt)->Forward(work).ok());
      }
    }
  }
}

// Decode steps replayed from captured CUDA graphs give the bits of the same steps launched op by op
// (FAK_CUDA_GRAPHS=0), prefill and decode alike, with the fused bias and residual epilogues in both;
// and so do kernels launched in plain stream order (FAK_CUDA_PDL=0) instead of overlapping, and the
// row ops run inside the products (FAK_CUDA_TAILS=1 or one kind alone) instead of as their own launches.
TEST(CudaModel, GraphReplayGivesTheBitsOfOpByOpLaunches) {
  SKIP_WITHOUT_GPU();
  for (const char* path :
       {"tests/fixtures/hf/qwen2-256", "../shared/fixtures/llamacpp-tiny/tiny-llama-q4_k_m.gguf"}) {
    SCOPED_TRACE(path);
    auto m = LoadFor(path, WeightQuant::kQ8_0, true);  // qwen2: q/k/v biases
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const int64_t vocab = (*m)->config.vocab_size;
    std::vector<int32_t> prompt = {1, 17, 300, 5, 99, 1023, 7, 42};
    for (auto& t : prompt) t %= static_cast<int32_t>(vocab);
    std::vector<std::vector<float>> runs;
    struct Mode {
      const char *graphs, *pdl, *tails;
    };
    const Mode modes[] = {Mode{"1", "1", "0"},   Mode{"0", "1", "0"},    Mode{"1", "0", "0"},
                          Mode{"0", "0", "0"},   Mode{"1", "1", "1"},    Mode{"0", "1", "1"},
                          Mode{"1", "0", "1"},   Mode{"1", "1", "norm"}, Mode{"1", "1", "silu"},
                          Mode{"1", "1", "rope"}};
    for (const Mode& mode : modes) {
      const ScopedEnv graphs("FAK_CUDA_GRAPHS", mode.graphs), pdl("FAK_CUDA_PDL", mode.pdl),
          tails("FAK_CUDA_TAILS", mode.tails);
      auto rt = Runtime::Create(**m, RuntimeOptions{.max_context = 64, .backend = {.name = "cuda"}});
      ASSERT_TRUE(rt.ok()) << rt.status().ToString();
      auto s = Session::Create(**rt);
      ASSERT_TRUE(s.ok());
      std::vector<float> all, l(static_cast<size_t>(vocab));
      ASSERT_TRUE((*s)->Prefill(prompt, l.data()).ok());
      for (int k = 0; k < 20; ++k) {
        all.insert(all.end(), l.begin(), l.end());
        ASSERT_TRUE((*s)->Step(Argmax(l), l.data()).ok());
      }
      runs.push_back(std::move(all));
    }
    // With the norm tail on (tails 1 or norm) every RMS norm sums in the tail's order (RmsNormRow), so
    // those modes are compared with each other, the rest with the first mode.
    const size_t first_norm_tail = 4;
    for (size_t i = 1; i < runs.size(); ++i) {
      const std::string tails = modes[i].tails;
      const size_t ref = tails == "1" || tails == "norm" ? first_norm_tail : 0;
      if (i == ref) continue;
      ASSERT_EQ(runs[ref].size(), runs[i].size());
      EXPECT_EQ(std::memcmp(runs[ref].data(), runs[i].data(), runs[ref].size() * 4), 0) << "mode " << i;
    }
  }
}

// Expert layers have no CUDA kernels yet: such a model is refused when bound, by name, before its
// weights are uploaded.
TEST(CudaModel, ExpertModelsAreRefusedByName) {
  SKIP_WITHOUT_GPU();
  for (const char* path : {"tests/fixtures/hf/qwen3next-tiny", "tests/fixtures/hf/qwen35moe-tiny"}) {
    SCOPED_TRACE(path);
    auto m = LoadFor(path, WeightQuant::kF32, true);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto rt = Runtime::Create(**m, RuntimeOptions{.max_context = 64, .backend = {.name = "cuda"}});
    ASSERT_FALSE(rt.ok());
    EXPECT_EQ(rt.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(rt.status().ToString().find("mixture-of-experts"), std::string::npos) << rt.status().ToString();
  }
}

// The hybrid's recurrent layers on the GPU: four prompts prefilled together and stepped together give
// each sequence the bits it gets alone (qwen35-tiny, f32 weights).
TEST(CudaModel, HybridSequencesGetTheSameBitsAloneAndInABatch) {
  SKIP_WITHOUT_GPU();
  // Alone, the norm after a one-row product's residual runs inside the product; in the batch, apart.
  const ScopedEnv tails("FAK_CUDA_TAILS", "1");
  auto m = LoadFor("tests/fixtures/hf/qwen35-tiny", WeightQuant::kF32, true);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto rt = Runtime::Create(
      **m, RuntimeOptions{.max_context = 256, .max_sequences = 4, .backend = {.name = "cuda"}});
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  const size_t vocab = static_cast<size_t>((*m)->config.vocab_size);
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 4; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(5 + 11 * i));
    for (size_t t = 0; t < p.size(); ++t) p[t] = static_cast<int32_t>((i * 7919 + t * 104729) % 150000);
    prompts.push_back(std::move(p));
  }
  const std::vector<int32_t> next = {11, 22, 33, 44};
  // Alone: prefill, then one step.
  std::vector<std::vector<float>> alone;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto seq = std::move((*rt)->NewSequence()).value();
    std::vector<float> l(vocab);
    SeqWork w{seq.get(), prompts[i], false, l.data()};
    ASSERT_TRUE((*rt)->Forward(std::span(&w, 1)).ok());
    w = {seq.get(), std::span<const int32_t>(&next[i], 1), false, l.data()};
    ASSERT_TRUE((*rt)->Forward(std::span(&w, 1)).ok());
    alone.push_back(l);
  }
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<std::vector<float>> got(prompts.size(), std::vector<float>(vocab));
  std::vector<SeqWork> work;
  for (size_t i = 0; i < prompts.size(); ++i) {
    seqs.push_back(std::move((*rt)->NewSequence()).value());
    work.push_back({seqs[i].get(), prompts[i], false, got[i].data()});
  }
  ASSERT_TRUE((*rt)->Forward(work).ok());
  work.clear();
  for (size_t i = 0; i < prompts.size(); ++i) {
    work.push_back({seqs[i].get(), std::span<const int32_t>(&next[i], 1), false, got[i].data()});
  }
  ASSERT_TRUE((*rt)->Forward(work).ok());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(std::memcmp(got[i].data(), alone[i].data(), vocab * 4), 0) << "sequence " << i;
  }
}

}  // namespace
}  // namespace fak::cuda_test
