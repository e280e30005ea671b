// Perplexity over chunks: the scored positions and BOS handling against a token-by-token computation,
// KL of a model against itself, refusals; and the trained model's perplexity against llama-perplexity's.
#include "engine/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/mapped_file.h"
#include "engine/model.h"
#include "engine/runtime.h"
#include "ops/backend.h"
#include "tokenizer/loader.h"

namespace fak {
namespace {

struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<Session> session;
  std::unique_ptr<Tokenizer> tokenizer;
};

Loaded Load(const std::string& path) {
  Loaded l;
  auto m = LoadModel(path);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  l.model = std::move(*m);
  auto b = CreateBackend({.name = "cpu", .threads = 2});
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  l.backend = std::move(*b);
  RuntimeOptions ro;
  ro.max_context = 512;
  ro.max_sequences = 1;
  auto rt = Runtime::Create(*l.model, ro, l.backend.get());
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  l.runtime = std::move(*rt);
  auto s = Session::Create(*l.runtime);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  l.session = std::move(*s);
  auto t = LoadTokenizer(path);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  l.tokenizer = std::make_unique<Tokenizer>(std::move(*t));
  return l;
}

TEST(Perplexity, ScoresTheSecondHalfOfEachChunkWithBos) {
  Loaded l = Load("../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf");
  std::vector<int32_t> tokens;
  for (int i = 0; i < 100; ++i) tokens.push_back(1 + (i * 37) % 500);
  PerplexityOptions o;
  o.ctx = 32;
  o.bos = 1;
  auto r = ComputePerplexity(*l.session, tokens, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->chunks, 3);
  EXPECT_EQ(r->scored, 3 * 15);
  // Token by token: each chunk from an empty context, its first token BOS, positions 16..30 scored.
  const int64_t vocab = l.session->vocab_size();
  std::vector<float> logits(static_cast<size_t>(vocab));
  double nll = 0;
  for (int c = 0; c < 3; ++c) {
    l.session->Truncate(0);
    for (int j = 0; j < 31; ++j) {
      const int32_t t = j == 0 ? 1 : tokens[static_cast<size_t>(c * 32 + j)];
      ASSERT_TRUE(l.session->Step(t, logits.data()).ok());
      if (j < 16) continue;
      double mx = logits[0], sum = 0;
      for (float x : logits) mx = std::max(mx, static_cast<double>(x));
      for (float x : logits) sum += std::exp(x - mx);
      nll += mx + std::log(sum) - logits[static_cast<size_t>(tokens[static_cast<size_t>(c * 32 + j + 1)])];
    }
  }
  EXPECT_NEAR(std::log(r->ppl), nll / 45, 1e-4);
  auto self = ComputePerplexity(*l.session, tokens, o, l.session.get());
  ASSERT_TRUE(self.ok());
  EXPECT_NEAR(self->kl_mean, 0.0, 1e-9);
  EXPECT_EQ(self->top1_agreement, 1.0);
  EXPECT_NEAR(self->base_ppl, self->ppl, 1e-9);
  o.ctx = 64;
  auto short_text = ComputePerplexity(*l.session, tokens, o);
  ASSERT_FALSE(short_text.ok());
  EXPECT_NE(short_text.status().message().find("needs at least 128"), std::string::npos);
  o.ctx = 4;
  EXPECT_FALSE(ComputePerplexity(*l.session, tokens, o).ok());
}

// tests/fixtures/text/README.md: llama-perplexity gives 30.7048 on this model and text (16 chunks).
TEST(Perplexity, TrainedModelMatchesLlamaPerplexity) {
  Loaded l = Load("models/qwen3-20m/qwen3-20m-q8_0.gguf");
  auto text = ReadFileToString("tests/fixtures/text/heldout-debian.txt");
  ASSERT_TRUE(text.ok());
  auto ids = l.tokenizer->Encode(*text, EncodeOptions{.add_special = true, .parse_special = false});
  ASSERT_TRUE(ids.ok());
  PerplexityOptions o;
  o.ctx = 256;
  o.max_chunks = 16;
  auto r = ComputePerplexity(*l.session, *ids, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->chunks, 16);
  EXPECT_NEAR(r->ppl, 30.7048, 30.7048 * 0.005);
}

// The Llama model with the SentencePiece tokenizer (BOS first in each chunk): llama-perplexity gives
// 9.4556 on the first 16 chunks (tests/fixtures/text/README.md).
TEST(Perplexity, TrainedLlamaModelMatchesLlamaPerplexity) {
  Loaded l = Load("models/llama-11m/llama-11m-q8_0.gguf");
  auto text = ReadFileToString("tests/fixtures/text/heldout-debian.txt");
  ASSERT_TRUE(text.ok());
  auto ids = l.tokenizer->Encode(*text, EncodeOptions{.add_special = true, .parse_special = false});
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(l.tokenizer->spec().add_bos);
  PerplexityOptions o;
  o.ctx = 256;
  o.max_chunks = 16;
  o.bos = l.tokenizer->bos_id();
  auto r = ComputePerplexity(*l.session, *ids, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->ppl, 9.4556, 9.4556 * 0.005);
}

}  // namespace
}  // namespace fak
