// Batch invariance of the runtime (DESIGN.md's contract): a sequence's logits are bit-identical
// whether it runs alone or in any batch, at any place in it, with its prompt in any chunking, and
// with its prefix adopted from another sequence's pages. Hundreds of random schedules are checked
// against each sequence run alone in one pass.
#include "engine/runtime.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/session.h"
#include "engine/test_fixtures.h"
#include "formats/gguf.h"

namespace fak {
namespace {

struct Seq {
  std::vector<int32_t> tokens;
  int fork_of = -1;  // shares the first `shared` tokens with this earlier sequence
  int64_t shared = 0;
  std::vector<float> want;  // (tokens.size(), vocab) logits, run alone in one pass
};

struct Case {
  const char* name;
  const char* path;
  WeightQuant quant;
  int schedules;
};

class BatchInvariance : public ::testing::TestWithParam<Case> {};

TEST_P(BatchInvariance, RandomSchedulesGiveTheLogitsOfEachSequenceAlone) {
  const Case c = GetParam();
  auto model = LoadModel(c.path, LoadOptions{.quant = c.quant});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int64_t vocab = (*model)->config.vocab_size;
  auto rt = Runtime::Create(
      **model,
      RuntimeOptions{.max_context = 64, .max_sequences = 12, .page_tokens = 4, .backend = {.threads = 2}});
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  std::mt19937 rng(20261201);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };

  // Sequences, some sharing a prefix with an earlier one (their tokens agree up to `shared`).
  const int n_seqs = 8;
  std::vector<Seq> seqs(n_seqs);
  for (int i = 0; i < n_seqs; ++i) {
    const int64_t len = uniform(1, 40);
    if (i > 0 && uniform(0, 2) == 0) {
      const int src = static_cast<int>(uniform(0, i - 1));
      seqs[i].fork_of = src;
      seqs[i].shared = uniform(1, static_cast<int64_t>(seqs[src].tokens.size()));
      seqs[i].tokens.assign(seqs[src].tokens.begin(), seqs[src].tokens.begin() + seqs[i].shared);
    }
    while (static_cast<int64_t>(seqs[i].tokens.size()) < len)
      seqs[i].tokens.push_back(static_cast<int32_t>(uniform(0, vocab - 1)));
    if (static_cast<int64_t>(seqs[i].tokens.size()) <= seqs[i].shared)
      seqs[i].shared = static_cast<int64_t>(seqs[i].tokens.size()) - 1;
    // Alone, one pass, every position's logits.
    auto s = Session::Create(**rt, SessionOptions{.prefill_chunk = 64});
    ASSERT_TRUE(s.ok());
    seqs[i].want.resize(seqs[i].tokens.size() * static_cast<size_t>(vocab));
    ASSERT_TRUE((*s)->Prefill(seqs[i].tokens, seqs[i].want.data(), /*all_logits=*/true).ok());
  }

  const int schedules = c.schedules;
  std::vector<float> got(64 * static_cast<size_t>(vocab));
  int64_t checked_rows = 0, max_batch_seqs = 0;
  for (int sched = 0; sched < schedules; ++sched) {
    SCOPED_TRACE("schedule " + std::to_string(sched));
    std::vector<std::unique_ptr<Sequence>> live(n_seqs);
    std::vector<int64_t> done(n_seqs, -1);  // -1: not started
    int finished = 0;
    while (finished < n_seqs) {
      // Start some sequences; a fork starts once its source has run past the shared prefix.
      for (int i = 0; i < n_seqs; ++i) {
        if (done[i] >= 0 || uniform(0, 1) == 0) continue;
        live[i] = std::move((*rt)->NewSequence()).value();
        done[i] = 0;
        const int src = seqs[i].fork_of;
        if (src >= 0 && live[src] != nullptr && done[src] >= seqs[i].shared && uniform(0, 1) == 1) {
          live[i]->Adopt(*live[src], seqs[i].shared);
          done[i] = seqs[i].shared;  // its first rows were checked through the source
        }
      }
      // One ragged batch: a random subset in random order, each a random chunk (often one token).
      std::vector<int> order;
      for (int i = 0; i < n_seqs; ++i) {
        if (done[i] >= 0 && done[i] < static_cast<int64_t>(seqs[i].tokens.size()) && uniform(0, 3) > 0)
          order.push_back(i);
      }
      if (order.empty()) continue;
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<SeqWork> work;
      std::vector<int64_t> offsets;
      int64_t rows = 0;
      for (int i : order) {
        const int64_t left = static_cast<int64_t>(seqs[i].tokens.size()) - done[i];
        const int64_t take = uniform(0, 2) == 0 ? 1 : uniform(1, left);
        if (rows + take > 64) continue;
        work.push_back({live[i].get(), std::span<const int32_t>(seqs[i].tokens).subspan(done[i], take), true,
                        &got[rows * vocab]});
        offsets.push_back(rows);
        rows += take;
      }
      if (work.empty()) continue;
      max_batch_seqs = std::max<int64_t>(max_batch_seqs, static_cast<int64_t>(work.size()));
      ASSERT_TRUE((*rt)->Forward(work).ok());
      for (size_t w = 0; w < work.size(); ++w) {
        const int i = static_cast<int>(
            std::find_if(live.begin(), live.end(), [&](const auto& p) { return p.get() == work[w].seq; }) -
            live.begin());
        const int64_t take = static_cast<int64_t>(work[w].tokens.size());
        const float* want = &seqs[i].want[done[i] * vocab];
        ASSERT_EQ(0, std::memcmp(want, &got[offsets[w] * vocab], static_cast<size_t>(take * vocab) * 4))
            << "sequence " << i << " positions " << done[i] << ".." << done[i] + take - 1;
        checked_rows += take;
        done[i] += take;
        if (done[i] == static_cast<int64_t>(seqs[i].tokens.size())) ++finished;
      }
      // Now and then a finished sequence leaves, giving its pages back (shared ones stay alive).
      for (int i = 0; i < n_seqs; ++i) {
        if (live[i] != nullptr && done[i] == static_cast<int64_t>(seqs[i].tokens.size()) &&
            uniform(0, 3) == 0) {
          live[i].reset();
        }
      }
    }
  }
  EXPECT_GT(max_batch_seqs, 3);
  EXPECT_GT(checked_rows, 1000);
  // Every page came back.
  EXPECT_EQ((*rt)->kv_pool().used_pages(), 0);
}

// qwen2-256 (q/k/v biases, vocab 2,048) converted at load to each kernel family, and llama.cpp's
// own Q4_K_M mix (q4_k and q6_k rows) on the tiny llama.
INSTANTIATE_TEST_SUITE_P(
    Types, BatchInvariance,
    ::testing::Values(Case{"qwen2_bf16", "tests/fixtures/hf/qwen2-256", WeightQuant::kKeep, 200},
                      Case{"qwen2_q8_0", "tests/fixtures/hf/qwen2-256", WeightQuant::kQ8_0, 200},
                      Case{"qwen2_q4_k", "tests/fixtures/hf/qwen2-256", WeightQuant::kQ4_K, 200},
                      Case{"llama_q4_k_m", "../shared/fixtures/llamacpp-tiny/tiny-llama-q4_k_m.gguf",
                           WeightQuant::kKeep, 20}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Runtime, BadBatchesAreRejectedAndChangeNothing) {
  auto model = LoadModel(kTinyLlama);
  ASSERT_TRUE(model.ok());
  auto rt = Runtime::Create(
      **model, RuntimeOptions{.max_context = 16, .kv_pages = 3, .page_tokens = 4, .backend = {.threads = 1}});
  ASSERT_TRUE(rt.ok());
  const int64_t vocab = (*model)->config.vocab_size;
  std::vector<float> logits(2 * vocab);
  auto a = std::move((*rt)->NewSequence()).value(), b = std::move((*rt)->NewSequence()).value();
  const std::vector<int32_t> five = {1, 2, 3, 4, 5}, bad = {1, 32000};
  // The same sequence twice, an unknown token, or an empty entry: refused, nothing written.
  SeqWork twice[] = {{a.get(), five, false, logits.data()}, {a.get(), five, false, logits.data()}};
  EXPECT_EQ((*rt)->Forward(twice).code(), StatusCode::kInvalidArgument);
  SeqWork oov[] = {{a.get(), five, false, logits.data()}, {b.get(), bad, false, &logits[vocab]}};
  Status s = (*rt)->Forward(oov);
  EXPECT_NE(s.message().find("token id 32000"), std::string::npos) << s.message();
  EXPECT_EQ(a->size(), 0);
  EXPECT_EQ((*rt)->kv_pool().used_pages(), 0);
  // A batch that needs more pages than the pool has fails whole and gives every page back.
  const std::vector<int32_t> nine(9, 7);
  SeqWork full[] = {{a.get(), five, false, logits.data()}, {b.get(), nine, false, &logits[vocab]}};
  s = (*rt)->Forward(full);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("KV cache is full"), std::string::npos) << s.message();
  EXPECT_EQ(a->size(), 0);
  EXPECT_EQ(b->size(), 0);
  EXPECT_EQ((*rt)->kv_pool().used_pages(), 0);
  // And the runtime still works.
  SeqWork ok[] = {{a.get(), five, false, logits.data()}};
  EXPECT_TRUE((*rt)->Forward(ok).ok());
  EXPECT_EQ(a->size(), 5);
  EXPECT_EQ(a->tokens(), five);
}

}  // namespace
}  // namespace fak

namespace fak {
namespace {

TEST(Runtime, SnapshotRestoresASequenceExactlyWhileTheOriginalGoesOn) {
  auto model = LoadModel("../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf");
  ASSERT_TRUE(model.ok());
  const int64_t vocab = (*model)->config.vocab_size;
  auto rt = Runtime::Create(
      **model,
      RuntimeOptions{.max_context = 64, .max_sequences = 3, .page_tokens = 16, .backend = {.threads = 2}});
  ASSERT_TRUE(rt.ok());
  std::vector<int32_t> prefix, rest;
  for (int i = 0; i < 20; ++i) prefix.push_back(100 + 13 * i);  // ends inside its second page
  for (int i = 0; i < 10; ++i) rest.push_back(900 + 7 * i);
  auto a = std::move((*rt)->NewSequence()).value();
  SeqWork w{a.get(), prefix, false, nullptr};
  ASSERT_TRUE((*rt)->Forward(std::span<const SeqWork>(&w, 1)).ok());
  auto snap = (*rt)->Snapshot(*a);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ((*snap)->size(), 20);
  // The original goes on, writing into the page it shares with the snapshot.
  std::vector<float> want(rest.size() * vocab), got(want.size());
  w = {a.get(), rest, true, want.data()};
  ASSERT_TRUE((*rt)->Forward(std::span<const SeqWork>(&w, 1)).ok());
  // A fresh sequence restored from the snapshot continues exactly as the original did.
  auto b = std::move((*rt)->NewSequence()).value();
  (*rt)->Restore(*b, **snap);
  EXPECT_EQ(b->tokens(), prefix);
  w = {b.get(), rest, true, got.data()};
  ASSERT_TRUE((*rt)->Forward(std::span<const SeqWork>(&w, 1)).ok());
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4));
  // Restoring over a sequence that has moved on rewinds it.
  (*rt)->Restore(*a, **snap);
  EXPECT_EQ(a->size(), 20);
  std::fill(got.begin(), got.end(), 0.0f);
  w = {a.get(), rest, true, got.data()};
  ASSERT_TRUE((*rt)->Forward(std::span<const SeqWork>(&w, 1)).ok());
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4));
  snap->reset();
  a.reset();
  b.reset();
  EXPECT_EQ((*rt)->kv_pool().used_pages(), 0);
}

}  // namespace
}  // namespace fak

namespace fak {
namespace {

// A copy of the tiny F16 model with one f32 norm weight set to NaN (hardening item 7).
std::string WriteModelWithNanNorm(const std::string& tensor) {
  const std::string src = "../shared/fixtures/llamacpp-tiny/tiny-llama-f16.gguf";
  auto file = GgufFile::Open(src);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return "";
  const GgufTensorInfo* t = file->FindTensor(tensor);
  EXPECT_TRUE(t != nullptr && t->type == GgmlType::kF32) << tensor;
  if (t == nullptr) return "";
  std::ifstream in(src, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const float nan = std::nanf("");
  std::memcpy(bytes.data() + file->data_offset() + t->offset + 4 * 17, &nan, 4);
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("fak_nan_norm_" + std::to_string(getpid()) + "_" + tensor + ".gguf"))
                              .string();
  std::ofstream(out, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return out;
}

TEST(Runtime, NonFiniteWeightsAreRefusedAndCheckFiniteNamesTheLayer) {
  const std::string path = WriteModelWithNanNorm("blk.1.ffn_norm.weight");
  ASSERT_FALSE(path.empty());
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::vector<int32_t> prompt = {1, 15043, 3186, 29892};
  std::vector<float> logits(32000);
  for (bool check : {false, true}) {
    SCOPED_TRACE(check);
    auto rt = Runtime::Create(
        **model, RuntimeOptions{.max_context = 64, .check_finite = check, .backend = {.threads = 2}});
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    auto s = Session::Create(**rt);
    ASSERT_TRUE(s.ok());
    Status st = (*s)->Prefill(prompt, logits.data());
    ASSERT_FALSE(st.ok());
    EXPECT_EQ((*s)->position(), 0);  // nothing of the failed pass is kept
    if (check) {
      EXPECT_NE(st.message().find("layer 1's ffn block output is the first that is not finite"),
                std::string::npos)
          << st.message();
    } else {
      EXPECT_NE(st.message().find("non-finite logits"), std::string::npos) << st.message();
    }
  }
  // The same check passes a healthy model with no error.
  auto good = LoadModel("../shared/fixtures/llamacpp-tiny/tiny-llama-f16.gguf");
  ASSERT_TRUE(good.ok());
  auto rt = Runtime::Create(
      **good, RuntimeOptions{.max_context = 64, .check_finite = true, .backend = {.threads = 2}});
  ASSERT_TRUE(rt.ok());
  auto s = Session::Create(**rt);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE((*s)->Prefill(prompt, logits.data()).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace fak
