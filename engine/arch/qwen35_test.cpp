// The Gated-DeltaNet hybrids (engine/arch/qwen35.cpp) beyond the HF oracle: the recurrent state makes
// prefill chunking, batching, snapshots and prefix reuse exact only if every op keeps each sequence's
// rows in order and in its own slot (and, with experts, each row's routing apart from its batch).
// Checked bit for bit on the qwen35-tiny, qwen3next-tiny and qwen35moe-tiny fixtures (f32 weights), and
// through the GGUF files fak writes for them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include "core/mapped_file.h"
#include "engine/convert/quantize.h"
#include "engine/convert/synth.h"
#include "engine/model.h"
#include "engine/prefix_cache.h"
#include "engine/runtime.h"
#include "engine/scheduler.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "tokenizer/loader.h"

namespace fak {
namespace {

// A GGUF path of this test process's own: ctest runs test processes in parallel.
std::string TempGguf(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("fak-" + std::to_string(getpid()) + "-" + name + ".gguf"))
      .string();
}

constexpr const char* kFixture = "tests/fixtures/hf/qwen35-tiny";
constexpr const char* kNextFixture = "tests/fixtures/hf/qwen3next-tiny";
constexpr const char* kMoeFixture = "tests/fixtures/hf/qwen35moe-tiny";

// The test-name suffix of a fixture.
std::string FixtureName(const testing::TestParamInfo<const char*>& i) {
  const std::string p = i.param;
  return p == kFixture ? "qwen35" : p == kNextFixture ? "qwen3next" : "qwen35moe";
}
constexpr const char* kTokenizer = "../shared/fixtures/tokenizers/qwen3";

std::vector<int32_t> Prompt(size_t n, int32_t seed) {
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((seed * 7919 + i * 104729) % 150000);
  return ids;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

class Hybrid : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    static std::map<std::string, std::unique_ptr<Model>> loaded;  // one load per fixture and process
    std::unique_ptr<Model>& m = loaded[GetParam()];
    if (m == nullptr) {
      auto r = LoadModel(GetParam(), LoadOptions{.quant = WeightQuant::kF32});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      m = std::move(r).value();
    }
    model_ = m.get();
  }

  std::unique_ptr<Runtime> MakeRuntime(int64_t sequences, int threads = 2, int64_t snapshots = 4) {
    auto rt = Runtime::Create(*model_, RuntimeOptions{.max_context = 512,
                                                      .max_sequences = sequences,
                                                      .kv_f32 = true,
                                                      .max_snapshots = snapshots,
                                                      .backend = {.threads = threads}});
    EXPECT_TRUE(rt.ok()) << rt.status().ToString();
    return rt.ok() ? std::move(rt).value() : nullptr;
  }

  // Every position's logits of `ids` fed in chunks of `chunk`.
  std::vector<float> Chunked(Runtime& rt, std::span<const int32_t> ids, size_t chunk) {
    const size_t vocab = static_cast<size_t>(rt.vocab_size());
    auto seq = std::move(rt.NewSequence()).value();
    std::vector<float> out(ids.size() * vocab);
    for (size_t i = 0; i < ids.size(); i += chunk) {
      const size_t n = std::min(chunk, ids.size() - i);
      SeqWork w{seq.get(), ids.subspan(i, n), true, &out[i * vocab]};
      EXPECT_TRUE(rt.Forward(std::span(&w, 1)).ok());
    }
    return out;
  }

  Model* model_ = nullptr;
};

INSTANTIATE_TEST_SUITE_P(Fixtures, Hybrid, testing::Values(kFixture, kNextFixture, kMoeFixture), FixtureName);

TEST_P(Hybrid, ConfigAndCaches) {
  const ModelConfig& c = model_->config;
  const bool next = std::string(GetParam()) == kNextFixture, moe = std::string(GetParam()) == kMoeFixture;
  EXPECT_EQ(c.arch, next ? "qwen3_next" : moe ? "qwen3_5_moe" : "qwen3_5");
  EXPECT_EQ(c.n_expert, next || moe ? 8 : 0);
  EXPECT_EQ(c.n_expert_used, next || moe ? 2 : 0);
  EXPECT_EQ(c.layer_is_moe, std::vector<bool>(next || moe ? 8 : 0, true));
  EXPECT_EQ(std::count(c.layer_is_linear.begin(), c.layer_is_linear.end(), true), 6);
  EXPECT_EQ(c.linear_n_key_head, 2);
  EXPECT_EQ(c.linear_n_value_head, 4);
  EXPECT_DOUBLE_EQ(c.rope.partial_rotary_factor, 0.25);
  EXPECT_EQ(model_->rope_inv_freq.size(), 2u);  // 4 of 16 dims rotate
  auto rt = MakeRuntime(1);
  ASSERT_NE(rt, nullptr);
  // Conv window (3 x (2*2*8 + 4*8)) and S (4 x 8 x 8) per linear layer, f32.
  EXPECT_EQ(rt->state_bytes(), 6u * (3 * 64 + 4 * 8 * 8) * 4);
}

TEST_P(Hybrid, PrefillInAnyChunksGivesTheSameBits) {
  auto rt = MakeRuntime(1);
  ASSERT_NE(rt, nullptr);
  const std::vector<int32_t> ids = Prompt(80, 1);
  const std::vector<float> whole = Chunked(*rt, ids, ids.size());
  for (size_t chunk : {1, 7, 64}) {
    EXPECT_TRUE(SameBits(Chunked(*rt, ids, chunk), whole)) << "chunks of " << chunk;
  }
}

TEST_P(Hybrid, ASequenceGetsTheSameBitsAloneAndInABatch) {
  auto rt = MakeRuntime(4);
  ASSERT_NE(rt, nullptr);
  const size_t vocab = static_cast<size_t>(rt->vocab_size());
  std::vector<std::vector<int32_t>> prompts = {Prompt(40, 2), Prompt(9, 3), Prompt(23, 4), Prompt(1, 5)};
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) alone.push_back(Chunked(*rt, p, p.size()));
  // All four in one ragged batch, then three decode steps together (each sequence's next token fixed).
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<std::vector<float>> got(prompts.size());
  std::vector<SeqWork> work;
  for (size_t i = 0; i < prompts.size(); ++i) {
    seqs.push_back(std::move(rt->NewSequence()).value());
    got[i].resize(prompts[i].size() * vocab);
    work.push_back({seqs[i].get(), prompts[i], true, got[i].data()});
  }
  ASSERT_TRUE(rt->Forward(work).ok());
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_TRUE(SameBits(got[i], alone[i])) << "prompt " << i;
  // Decode: the batch against each sequence stepped alone.
  std::vector<int32_t> next = {11, 22, 33, 44};
  std::vector<std::vector<float>> step(prompts.size(), std::vector<float>(vocab));
  work.clear();
  for (size_t i = 0; i < prompts.size(); ++i) {
    work.push_back({seqs[i].get(), std::span<const int32_t>(&next[i], 1), false, step[i].data()});
  }
  ASSERT_TRUE(rt->Forward(work).ok());
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> ids = prompts[i];
    ids.push_back(next[i]);
    const std::vector<float> ref = Chunked(*rt, ids, ids.size());
    EXPECT_EQ(std::memcmp(step[i].data(), &ref[prompts[i].size() * vocab], vocab * 4), 0) << "sequence " << i;
  }
}

TEST_P(Hybrid, ASnapshotContinuesExactlyAndTruncationStartsOver) {
  auto rt = MakeRuntime(2);
  ASSERT_NE(rt, nullptr);
  const size_t vocab = static_cast<size_t>(rt->vocab_size());
  const std::vector<int32_t> prefix = Prompt(37, 6), suffix = Prompt(12, 7);
  std::vector<int32_t> full = prefix;
  full.insert(full.end(), suffix.begin(), suffix.end());
  const std::vector<float> ref = Chunked(*rt, full, full.size());
  const std::vector<float> want(ref.begin() + static_cast<ptrdiff_t>(prefix.size() * vocab), ref.end());

  auto a = std::move(rt->NewSequence()).value();
  SeqWork w{a.get(), prefix, false, nullptr};
  ASSERT_TRUE(rt->Forward(std::span(&w, 1)).ok());
  auto snap = rt->Snapshot(*a);
  ASSERT_TRUE(snap.ok());
  // The sequence goes on elsewhere; the snapshot keeps the state as it was.
  const std::vector<int32_t> other = Prompt(5, 8);
  w = {a.get(), other, false, nullptr};
  ASSERT_TRUE(rt->Forward(std::span(&w, 1)).ok());
  auto b = std::move(rt->NewSequence()).value();
  rt->Restore(*b, **snap);
  EXPECT_EQ(b->size(), static_cast<int64_t>(prefix.size()));
  std::vector<float> got(suffix.size() * vocab);
  w = {b.get(), suffix, true, got.data()};
  ASSERT_TRUE(rt->Forward(std::span(&w, 1)).ok());
  EXPECT_TRUE(SameBits(got, want));

  // A recurrent state cannot be cut back: any truncation below the end starts the sequence over.
  a->Truncate(a->size());
  EXPECT_EQ(a->size(), static_cast<int64_t>(prefix.size() + other.size()));
  a->Truncate(10);
  EXPECT_EQ(a->size(), 0);
  std::vector<float> again(full.size() * vocab);
  w = {a.get(), full, true, again.data()};
  ASSERT_TRUE(rt->Forward(std::span(&w, 1)).ok());
  EXPECT_TRUE(SameBits(again, ref));
}

// A pass that fails after it ran (non-finite logits: here a NaN put into the final norm) may have
// advanced the states of its sequences: they come back empty and cleared, so they go on as new ones.
TEST_P(Hybrid, AFailedPassLeavesItsSequencesEmptyAndClear) {
  auto rt = MakeRuntime(1);
  ASSERT_NE(rt, nullptr);
  const size_t vocab = static_cast<size_t>(rt->vocab_size());
  const std::vector<int32_t> p1 = Prompt(12, 14), p2 = Prompt(9, 15);
  const std::vector<float> want = Chunked(*rt, p2, p2.size());
  auto seq = std::move(rt->NewSequence()).value();
  float* norm = const_cast<float*>(model_->Get("output_norm.weight").f32());
  const float saved = norm[0];
  norm[0] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits(p2.size() * vocab);
  SeqWork w{seq.get(), p1, false, logits.data()};
  EXPECT_EQ(rt->Forward(std::span(&w, 1)).code(), StatusCode::kCorrupt);
  norm[0] = saved;
  EXPECT_EQ(seq->size(), 0);
  w = {seq.get(), p2, true, logits.data()};
  ASSERT_TRUE(rt->Forward(std::span(&w, 1)).ok());
  EXPECT_TRUE(SameBits(logits, want));
}

// A router whose logits are not finite (here a NaN weight) picks no expert: the pass fails as any
// non-finite pass does, without reading outside the experts.
TEST_P(Hybrid, ANonFiniteRouterFailsThePass) {
  if (model_->config.n_expert == 0) GTEST_SKIP() << "no experts";
  auto rt = MakeRuntime(1);
  ASSERT_NE(rt, nullptr);
  auto seq = std::move(rt->NewSequence()).value();
  const Weight& router = model_->Get("blk.0.ffn_gate_inp.weight");
  ASSERT_EQ(router.type, GgmlType::kF32);
  float* w = const_cast<float*>(router.f32());
  const std::vector<float> saved(w, w + router.cols);
  std::fill(w, w + router.cols, std::numeric_limits<float>::quiet_NaN());
  const std::vector<int32_t> ids = Prompt(5, 16);
  std::vector<float> logits(static_cast<size_t>(rt->vocab_size()));
  SeqWork work{seq.get(), ids, false, logits.data()};
  EXPECT_EQ(rt->Forward(std::span(&work, 1)).code(), StatusCode::kCorrupt);
  std::copy(saved.begin(), saved.end(), w);
  EXPECT_EQ(seq->size(), 0);
}

TEST_P(Hybrid, PrefixCacheHitsOnlyWhereAStateWasKept) {
  auto rt = MakeRuntime(2);
  ASSERT_NE(rt, nullptr);
  const size_t vocab = static_cast<size_t>(rt->vocab_size());
  PrefixCache cache(*rt);
  const std::vector<int32_t> preamble = Prompt(48, 9), task = Prompt(6, 10);
  auto a = std::move(rt->NewSequence()).value();
  SeqWork w{a.get(), preamble, false, nullptr};
  ASSERT_TRUE(rt->Forward(std::span(&w, 1)).ok());
  ASSERT_TRUE(cache.Insert(*a).ok());
  std::vector<int32_t> full = preamble;
  full.insert(full.end(), task.begin(), task.end());
  // A longer prompt hits the whole entry; one that ends inside it cannot use it (no state there).
  EXPECT_EQ(cache.MatchLength(full, static_cast<int64_t>(full.size()) - 1), 48);
  EXPECT_EQ(cache.MatchLength(std::span<const int32_t>(full).first(30), 29), 0);
  auto b = std::move(rt->NewSequence()).value();
  ASSERT_EQ(cache.Restore(full, static_cast<int64_t>(full.size()) - 1, *b), 48);
  std::vector<float> got(task.size() * vocab);
  w = {b.get(), task, true, got.data()};
  ASSERT_TRUE(rt->Forward(std::span(&w, 1)).ok());
  const std::vector<float> ref = Chunked(*rt, full, full.size());
  EXPECT_TRUE(SameBits(got, std::vector<float>(ref.begin() + 48 * static_cast<ptrdiff_t>(vocab), ref.end())));
}

// A fleet of agents with one preamble through the scheduler: the second request keeps a state where
// its prompt leaves the first one's path, every later one starts there, and all of them decode the
// tokens and log-probabilities they decode alone with no cache.
TEST_P(Hybrid, AgentsAfterTheSecondSkipTheSharedPreambleAndDecodeAsAlone) {
  auto tok = LoadTokenizer(kTokenizer);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::vector<int32_t> preamble = Prompt(41, 13);
  std::vector<GenerationRequest> reqs;
  for (int32_t i = 0; i < 6; ++i) {
    GenerationRequest r;
    r.prompt = preamble;
    for (int32_t t : Prompt(3 + static_cast<size_t>(i) * 2, 100 + i)) r.prompt.push_back(t);
    r.limits.max_tokens = 6;
    r.limits.ignore_eos = true;
    r.sampling.temperature = i % 2 == 0 ? 0.0f : 0.8f;
    r.sampling.seed = 7 + static_cast<uint64_t>(i);
    r.top_logprobs = 0;
    reqs.push_back(std::move(r));
  }
  struct Out {
    std::vector<int32_t> ids;
    std::vector<float> logprobs;
    int64_t cached = 0;
  };
  auto drain = [](RequestHandle& h) {
    Out o;
    while (true) {
      RequestDelta d = h.Take(std::chrono::milliseconds(5000));
      for (const auto& t : d.tokens) {
        o.ids.push_back(t.id);
        o.logprobs.push_back(t.logprob);
      }
      if (d.finished) {
        EXPECT_TRUE(d.error.ok()) << d.error.ToString();
        o.cached = d.usage.cached_tokens;
        return o;
      }
    }
  };
  std::vector<Out> alone;
  {
    auto rt = MakeRuntime(1);
    Scheduler s(*rt, *tok, {}, SchedulerOptions{.max_active = 1, .prefix_cache = false});
    for (const auto& r : reqs) alone.push_back(drain(**s.Submit(r)));
  }
  auto rt = MakeRuntime(4);
  Scheduler s(*rt, *tok, {}, SchedulerOptions{.max_active = 4, .step_tokens = 16, .min_prefill = 4});
  std::vector<Out> got;
  got.push_back(drain(**s.Submit(reqs[0])));
  got.push_back(drain(**s.Submit(reqs[1])));
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (size_t i = 2; i < reqs.size(); ++i) hs.push_back(*s.Submit(reqs[i]));
  for (auto& h : hs) got.push_back(drain(*h));
  EXPECT_EQ(got[0].cached, 0);
  EXPECT_EQ(got[1].cached, 0);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    if (i >= 2) {
      EXPECT_EQ(got[i].cached, static_cast<int64_t>(preamble.size()));
    }
    EXPECT_EQ(got[i].ids, alone[i].ids);
    EXPECT_EQ(got[i].logprobs, alone[i].logprobs);  // bit for bit
  }
  // With prefill checkpoints every 16 tokens, agents that arrive together after the first restore at
  // least the state it kept at 32, with the same results. Room for every checkpoint of the burst: with
  // four snapshots, checkpoints the burst's own prefills leave can evict that one first, depending on
  // which agents the scheduler takes into which step (a run under ASan saw it).
  auto rt2 = MakeRuntime(4, 2, /*snapshots=*/16);
  Scheduler s2(
      *rt2, *tok, {},
      SchedulerOptions{.max_active = 5, .step_tokens = 16, .min_prefill = 4, .state_checkpoint = 16});
  std::vector<Out> burst;
  burst.push_back(drain(**s2.Submit(reqs[0])));
  hs.clear();
  for (size_t i = 1; i < reqs.size(); ++i) hs.push_back(*s2.Submit(reqs[i]));
  for (auto& h : hs) burst.push_back(drain(*h));
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    // 32 from the checkpoint, or 41 when an agent of the burst kept the end of the preamble first.
    if (i == 0) {
      EXPECT_EQ(burst[i].cached, 0);
    }
    if (i > 0) {
      EXPECT_GE(burst[i].cached, 32);
    }
    EXPECT_EQ(burst[i].ids, alone[i].ids);
    EXPECT_EQ(burst[i].logprobs, alone[i].logprobs);
  }
}

class HybridGgufWrite : public testing::TestWithParam<const char*> {};

INSTANTIATE_TEST_SUITE_P(Fixtures, HybridGgufWrite, testing::Values(kFixture, kNextFixture, kMoeFixture),
                         FixtureName);

TEST_P(HybridGgufWrite, FakWritesAFileThatLoadsToTheSameModel) {
  const bool next = std::string(GetParam()) == kNextFixture, moe = std::string(GetParam()) == kMoeFixture;
  const std::string a = next ? "qwen3next" : moe ? "qwen35moe" : "qwen35";  // llama.cpp's name
  const std::string out = TempGguf(a + "-tiny-f32");
  convert::QuantizeOptions o{
      .input = GetParam(), .output = out, .type = "f32", .threads = 2, .tokenizer = kTokenizer};
  auto report = convert::QuantizeModel(o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto gguf = GgufFile::Open(out);
  ASSERT_TRUE(gguf.ok());
  EXPECT_EQ(*gguf->GetString("general.architecture"), a);
  EXPECT_EQ(*gguf->GetUint(a + ".ssm.group_count"), 2u);
  EXPECT_EQ(*gguf->GetUint(a + ".ssm.time_step_rank"), 4u);
  EXPECT_EQ(*gguf->GetUint(a + ".rope.dimension_count"), 4u);
  // llama.cpp's convolution reads its kernel as f32 whatever the file type.
  ASSERT_NE(gguf->FindTensor("blk.0.ssm_conv1d.weight"), nullptr);
  EXPECT_EQ(gguf->FindTensor("blk.0.ssm_conv1d.weight")->type, GgmlType::kF32);
  EXPECT_EQ(gguf->FindTensor("blk.0.ssm_conv1d.weight")->shape, (std::vector<uint64_t>{4, 64}));
  if (next || moe) {
    EXPECT_EQ(*gguf->GetUint(a + ".expert_count"), 8u);
    EXPECT_EQ(*gguf->GetUint(a + ".expert_used_count"), 2u);
    EXPECT_EQ(*gguf->GetUint(a + ".expert_feed_forward_length"), 32u);
    EXPECT_EQ(*gguf->GetUint(a + ".expert_shared_feed_forward_length"), 48u);
    // The experts as llama.cpp stacks them, the router in f32, the shared expert's gate a vector.
    const GgufTensorInfo* exps = gguf->FindTensor("blk.3.ffn_down_exps.weight");
    ASSERT_NE(exps, nullptr);
    EXPECT_EQ(exps->shape, (std::vector<uint64_t>{32, 16, 8}));
    ASSERT_NE(gguf->FindTensor("blk.3.ffn_gate_inp.weight"), nullptr);
    EXPECT_EQ(gguf->FindTensor("blk.3.ffn_gate_inp.weight")->type, GgmlType::kF32);
    ASSERT_NE(gguf->FindTensor("blk.3.ffn_gate_inp_shexp.weight"), nullptr);
    EXPECT_EQ(gguf->FindTensor("blk.3.ffn_gate_inp_shexp.weight")->shape, (std::vector<uint64_t>{16}));
  }
  // Qwen3-Next keeps b and a fused (llama.cpp's ssm_ba); Qwen3.5 has them apart.
  EXPECT_EQ(gguf->FindTensor("blk.0.ssm_ba.weight") != nullptr, next);
  EXPECT_EQ(gguf->FindTensor("blk.0.ssm_beta.weight") != nullptr, !next);
  if (next) {
    EXPECT_EQ(gguf->FindTensor("blk.0.ssm_ba.weight")->shape, (std::vector<uint64_t>{16, 8}));
  }
  auto hf = LoadModel(GetParam(), LoadOptions{.quant = WeightQuant::kF32});
  auto gg = LoadModel(out, LoadOptions{.quant = WeightQuant::kF32});
  ASSERT_TRUE(hf.ok() && gg.ok()) << (gg.ok() ? hf.status() : gg.status()).ToString();
  EXPECT_EQ((*gg)->config.layer_is_linear, (*hf)->config.layer_is_linear);
  // Every weight, value for value (the HF side mapped at load, the GGUF side as fak wrote it).
  for (const auto& [name, w] : (*hf)->weights) {
    const Weight& g = (*gg)->Get(name);
    ASSERT_TRUE(g.present()) << name;
    ASSERT_EQ(g.rows, w.rows) << name;
    ASSERT_EQ(g.cols, w.cols) << name;
    if (!w.packed && !g.packed) {
      EXPECT_EQ(std::memcmp(w.data, g.data, static_cast<size_t>(w.rows) * w.row_bytes), 0) << name;
    }
  }
  auto run = [](const Model& m, const std::vector<int32_t>& ids) {
    auto rt =
        Runtime::Create(m, RuntimeOptions{.max_context = 256, .kv_f32 = true, .backend = {.threads = 2}});
    EXPECT_TRUE(rt.ok());
    auto seq = std::move((*rt)->NewSequence()).value();
    std::vector<float> logits(ids.size() * static_cast<size_t>(m.config.vocab_size));
    SeqWork w{seq.get(), ids, true, logits.data()};
    EXPECT_TRUE((*rt)->Forward(std::span(&w, 1)).ok());
    return logits;
  };
  const std::vector<int32_t> ids = Prompt(20, 11);
  EXPECT_TRUE(SameBits(run(**hf, ids), run(**gg, ids)));
  std::filesystem::remove(out);
}

class HybridSynth : public testing::TestWithParam<const char*> {};

INSTANTIATE_TEST_SUITE_P(Geometries, HybridSynth, testing::Values("tiny-hybrid", "tiny-hybrid-moe"),
                         [](const testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param) == "tiny-hybrid" ? "dense" : "experts";
                         });

TEST_P(HybridSynth, WritesAQuantizedHybridThatRuns) {
  const bool moe = std::string(GetParam()) == "tiny-hybrid-moe";
  const std::string out = TempGguf(std::string(GetParam()) + "-q8_0");
  auto report = convert::Synthesize(
      convert::SynthOptions{.geometry = GetParam(), .type = "q8_0", .output = out, .tokenizer = kTokenizer});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto m = LoadModel(out);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->config.arch, moe ? "qwen3_5_moe" : "qwen3_5");
  if (moe) {
    EXPECT_EQ((*m)->Get("blk.0.ffn_gate_exps.weight").type, GgmlType::kQ8_0);
    EXPECT_EQ((*m)->Get("blk.0.ffn_gate_exps.weight").rows, 8 * 128);
    EXPECT_EQ((*m)->Get("blk.0.ffn_gate_inp.weight").type, GgmlType::kF32);
  }
  EXPECT_EQ((*m)->Get("blk.0.attn_qkv.weight").type, GgmlType::kQ8_0);
  EXPECT_EQ((*m)->Get("blk.0.ssm_conv1d.weight").type, GgmlType::kF32);
  auto rt = Runtime::Create(**m, RuntimeOptions{.max_context = 128, .backend = {.threads = 2}});
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  auto seq = std::move((*rt)->NewSequence()).value();
  const std::vector<int32_t> ids = Prompt(30, 12);
  std::vector<float> logits(static_cast<size_t>((*m)->config.vocab_size));
  SeqWork w{seq.get(), ids, false, logits.data()};
  EXPECT_TRUE((*rt)->Forward(std::span(&w, 1)).ok());  // non-finite logits would fail here
  std::filesystem::remove(out);
}

// A broken copy of a GGUF file: `edit` applied to its metadata, tensor `drop` left out.
struct Breakage {
  const char* name;
  std::function<void(GgufWriter&)> edit;
  std::string drop;
  const char* want;  // in the error
};

// Hostile files: each breakage of the fixture's good GGUF is refused at load (never at run time) with
// an error naming what is wrong.
void ExpectRefused(const char* fixture, const std::string& tag, const std::vector<Breakage>& cases) {
  const std::string good = TempGguf(tag + "-good");
  auto report = convert::QuantizeModel(convert::QuantizeOptions{
      .input = fixture, .output = good, .type = "f32", .threads = 2, .tokenizer = kTokenizer});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto in = GgufFile::Open(good);
  ASSERT_TRUE(in.ok());
  for (const Breakage& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = TempGguf(tag + "-" + c.name);
    GgufWriter w(in->alignment());
    for (const auto& [k, v] : in->metadata()) {
      if (k != "general.alignment") w.SetValue(k, v);
    }
    c.edit(w);
    for (const GgufTensorInfo& t : in->tensors()) {
      if (t.name == c.drop) continue;
      EXPECT_TRUE(w.AddTensor(t.name, t.shape, t.type, std::span<const uint8_t>(t.data, t.n_bytes)).ok());
    }
    ASSERT_TRUE(w.Write(path).ok());
    auto m = LoadModel(path);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().ToString().find(c.want), std::string::npos) << m.status().ToString();
    std::filesystem::remove(path);
  }
  std::filesystem::remove(good);
}

TEST(HybridGguf, BrokenFilesAreRefusedByName) {
  auto bool_array = [](size_t n, bool v) {
    auto a = std::make_shared<GgufArray>();
    a->element_type = GgufValueType::kBool;
    for (size_t i = 0; i < n; ++i) a->values.push_back(GgufValue{GgufValueType::kBool, v});
    return GgufValue{GgufValueType::kArray, a};
  };
  ExpectRefused(
      kFixture, "qwen35",
      {
          {"inner", [](GgufWriter& w) { w.SetUint32("qwen35.ssm.inner_size", 33); }, "", "ssm.inner_size"},
          {"groups", [](GgufWriter& w) { w.SetUint32("qwen35.ssm.group_count", 3); }, "",
           "linear_num_value_heads"},
          {"kernel", [](GgufWriter& w) { w.SetUint32("qwen35.ssm.conv_kernel", 0); }, "",
           "linear_conv_kernel_dim"},
          {"huge", [](GgufWriter& w) { w.SetUint32("qwen35.ssm.state_size", 1u << 20); }, "", "implausible"},
          {"layers",
           [&](GgufWriter& w) { w.SetValue("qwen35.attention.recurrent_layers", bool_array(3, true)); }, "",
           "layer types"},
          {"conv-shape", [](GgufWriter& w) { w.SetUint32("qwen35.ssm.conv_kernel", 5); }, "", "ssm_conv1d"},
          {"missing", [](GgufWriter&) {}, "blk.4.ssm_a", "blk.4.ssm_a"},
      });
}

TEST(HybridGguf, BrokenExpertFilesAreRefusedByName) {
  ExpectRefused(
      kNextFixture, "qwen3next",
      {
          {"used", [](GgufWriter& w) { w.SetUint32("qwen3next.expert_used_count", 9); }, "",
           "experts per token"},
          {"none-used", [](GgufWriter& w) { w.SetUint32("qwen3next.expert_used_count", 0); }, "",
           "num_experts_per_tok"},
          {"count", [](GgufWriter& w) { w.SetUint32("qwen3next.expert_count", 6); }, "", "ffn_gate_inp"},
          {"width", [](GgufWriter& w) { w.SetUint32("qwen3next.expert_feed_forward_length", 31); }, "",
           "ffn_gate_exps"},
          {"shared", [](GgufWriter& w) { w.SetUint32("qwen3next.expert_shared_feed_forward_length", 40); },
           "", "ffn_gate_shexp"},
          {"experts", [](GgufWriter&) {}, "blk.2.ffn_up_exps.weight", "blk.2.ffn_up_exps.weight"},
          {"ba", [](GgufWriter&) {}, "blk.0.ssm_ba.weight", "blk.0.ssm_ba.weight"},
      });
}

// A Qwen3-Next checkpoint folder whose config or tensors disagree: refused at load, naming the problem.
TEST(HybridHf, BrokenExpertCheckpointsAreRefusedByName) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fak-" + std::to_string(getpid()) + "-qwen3next-broken");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(std::string(kNextFixture) + "/model.safetensors", dir / "model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  auto config = ReadFileToString(std::string(kNextFixture) + "/config.json");
  ASSERT_TRUE(config.ok());
  const struct {
    const char* field;
    const char* value;
    const char* want;
  } cases[] = {
      {"num_experts", "9", "has 8 experts, the config 9"},
      {"num_experts_per_tok", "12", "experts per token"},
      {"moe_intermediate_size", "0", "moe_intermediate_size"},
      {"linear_num_key_heads", "4", "in_proj_qkvz"},
      {"decoder_sparse_step", "0", "decoder_sparse_step"},
      {"mlp_only_layers", "\"all\"", "mlp_only_layers"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.field);
    const std::string key = std::string("\"") + c.field + "\": ";
    const size_t at = config->find(key);
    ASSERT_NE(at, std::string::npos);
    const size_t end = config->find_first_of(",\n}", at + key.size());
    std::string broken = *config;
    broken.replace(at + key.size(), end - at - key.size(), c.value);
    std::ofstream((dir / "config.json").string(), std::ios::trunc) << broken;
    auto m = LoadModel(dir.string());
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().ToString().find(c.want), std::string::npos) << m.status().ToString();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fak
