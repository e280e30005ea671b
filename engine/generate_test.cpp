// GenerateFromIds on a real model (llamacpp-tiny Q8_0, greedy): each way a generation ends (a stop
// string split across tokens, end of sequence, the token limit, a full context) and what is streamed;
// and Truncate(k) followed by a prefill giving the bits of a fresh prefill.
#include "engine/generate.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "engine/model.h"
#include "engine/runtime.h"
#include "engine/session.h"
#include "tokenizer/loader.h"

namespace fak {
namespace {

const char* kModel = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";

class GenerateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = LoadModel(kModel);
    if (!model.ok()) GTEST_SKIP() << "skipped: " << model.status().ToString();
    model_ = std::move(*model);
    auto tok = LoadTokenizer(kModel);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tok_ = std::make_unique<Tokenizer>(std::move(*tok));
    auto rt = Runtime::Create(*model_, RuntimeOptions{.max_context = 64, .backend = {.threads = 2}});
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    rt_ = std::move(*rt);
    auto s = Session::Create(*rt_);
    ASSERT_TRUE(s.ok());
    session_ = std::move(*s);
    auto ids = tok_->Encode("Once upon a time", EncodeOptions{.add_special = true, .parse_special = false});
    ASSERT_TRUE(ids.ok());
    prompt_ = *ids;
  }

  // Generates from the prompt on a fresh session; `streamed` receives what on_text was given.
  GenerateResult Generate(GenerateOptions o, std::string* streamed = nullptr) {
    session_->Truncate(0);
    std::string text;
    o.on_text = [&text](const std::string& t) {
      text += t;
      return true;
    };
    auto r = GenerateFromIds(*session_, *tok_, prompt_, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (streamed != nullptr) *streamed = text;
    return r.ok() ? *r : GenerateResult{};
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<Runtime> rt_;
  std::unique_ptr<Session> session_;
  std::vector<int32_t> prompt_;
};

TEST_F(GenerateTest, LengthStopAndStreamedTextEqualsTheResult) {
  GenerateOptions o;
  o.max_tokens = 12;
  std::string streamed;
  GenerateResult r = Generate(o, &streamed);
  EXPECT_EQ(r.stop_reason, "length");
  EXPECT_EQ(r.output_ids.size(), 12u);
  EXPECT_EQ(streamed, r.text);
  auto decoded = tok_->Decode(r.output_ids);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(r.text, *decoded);
  o.max_tokens = 0;
  EXPECT_TRUE(Generate(o).output_ids.empty());
}

// A stop string made of the end of one token's text and the start of the next: generation ends
// before it, and no part of it is ever streamed (the decoder holds back a possible stop prefix).
TEST_F(GenerateTest, StopStringSplitAcrossTokens) {
  GenerateOptions o;
  o.max_tokens = 24;
  const GenerateResult full = Generate(o);
  ASSERT_EQ(full.output_ids.size(), 24u);
  // The first pair of neighbouring tokens whose texts are at least two bytes each, without spaces.
  std::string stop;
  size_t stop_at = 0;  // byte offset in full.text where the stop string starts
  size_t offset = 0;
  for (size_t i = 0; i + 1 < full.output_ids.size() && stop.empty(); ++i) {
    auto a = tok_->Decode(std::span<const int32_t>(full.output_ids.data(), i + 1));
    auto b = tok_->Decode(std::span<const int32_t>(full.output_ids.data(), i + 2));
    ASSERT_TRUE(a.ok() && b.ok());
    const std::string left = a->substr(offset), right = b->substr(a->size());
    if (left.size() >= 2 && right.size() >= 2 && left.find(' ') == std::string::npos &&
        right.find(' ') == std::string::npos) {
      stop = left.substr(left.size() - 2) + right.substr(0, 2);
      stop_at = a->size() - 2;
    }
    offset = a->size();
  }
  ASSERT_FALSE(stop.empty()) << full.text;
  ASSERT_EQ(full.text.find(stop), stop_at) << "stop string must first occur at the split: " << stop;
  o.stop = {"never-generated-string", stop};
  std::string streamed;
  const GenerateResult r = Generate(o, &streamed);
  EXPECT_EQ(r.stop_reason, "stop");
  EXPECT_EQ(r.text, full.text.substr(0, stop_at));
  EXPECT_EQ(streamed, r.text);
}

// End of sequence: a logit bias makes EOS the argmax at the first step; generation ends there and
// EOS's text is not part of the output. With ignore_eos it goes on to the limit.
TEST_F(GenerateTest, EndOfSequenceStop) {
  const int32_t eos = tok_->eos_id();
  ASSERT_GE(eos, 0);
  GenerateOptions o;
  o.max_tokens = 16;
  o.sampling.logit_bias = {{eos, 1000.0f}};
  GenerateResult r = Generate(o);
  EXPECT_EQ(r.stop_reason, "eos");
  EXPECT_LE(r.output_ids.size(), 1u);  // nothing, or EOS itself
  if (!r.output_ids.empty()) {
    EXPECT_EQ(r.output_ids[0], eos);
  }
  EXPECT_TRUE(r.text.empty()) << r.text;
  o.ignore_eos = true;
  r = Generate(o);
  EXPECT_EQ(r.stop_reason, "length");
  EXPECT_EQ(r.output_ids.size(), 16u);
  // A banned token is never produced.
  GenerateOptions free;
  free.max_tokens = 8;
  const GenerateResult base = Generate(free);
  free.sampling.logit_bias = {{base.output_ids[0], -std::numeric_limits<float>::infinity()}};
  const GenerateResult banned = Generate(free);
  EXPECT_NE(banned.output_ids[0], base.output_ids[0]);
}

TEST_F(GenerateTest, ContextStop) {
  GenerateOptions o;
  o.max_tokens = std::numeric_limits<int64_t>::max();  // -n -1
  const GenerateResult r = Generate(o);
  EXPECT_EQ(r.stop_reason, "context");
  // Every position holds a token; the last token sampled needs none.
  EXPECT_EQ(static_cast<int64_t>(prompt_.size() + r.output_ids.size()), session_->max_context() + 1);
  EXPECT_EQ(session_->position(), session_->max_context());
}

// Truncate(k) then prefilling the rest gives the same bits as a fresh prefill of the whole sequence,
// at every k, and so does the decode step after it.
TEST_F(GenerateTest, TruncateThenPrefillEqualsAFreshPrefill) {
  auto ids = tok_->Encode("The quick brown fox jumps over the lazy dog near the river bank today",
                          EncodeOptions{.add_special = true, .parse_special = false});
  ASSERT_TRUE(ids.ok());
  const std::vector<int32_t> seq = *ids;
  const size_t vocab = static_cast<size_t>(session_->vocab_size());
  std::vector<float> fresh(vocab), fresh_step(vocab), got(vocab);
  session_->Truncate(0);
  ASSERT_TRUE(session_->Prefill(seq, fresh.data()).ok());
  ASSERT_TRUE(session_->Step(7, fresh_step.data()).ok());
  for (size_t k : {size_t{0}, size_t{1}, size_t{5}, seq.size() - 1}) {
    SCOPED_TRACE(k);
    // Fill past k with other tokens first, so the truncated positions held something else.
    session_->Truncate(0);
    std::vector<int32_t> other = seq;
    for (size_t i = k; i < other.size(); ++i) other[i] = static_cast<int32_t>(100 + i);
    ASSERT_TRUE(session_->Prefill(other, got.data()).ok());
    session_->Truncate(static_cast<int64_t>(k));
    ASSERT_TRUE(session_->Prefill(std::span<const int32_t>(seq).subspan(k), got.data()).ok());
    EXPECT_EQ(0, std::memcmp(got.data(), fresh.data(), vocab * sizeof(float)));
    ASSERT_TRUE(session_->Step(7, got.data()).ok());
    EXPECT_EQ(0, std::memcmp(got.data(), fresh_step.data(), vocab * sizeof(float)));
  }
}

}  // namespace
}  // namespace fak
