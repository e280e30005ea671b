// The request decoder under a grammar: only allowed tokens, the end when the grammar is complete, and
// a trigger that turns the grammar on in the middle of free text.
#include "engine/decoder.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "grammar/vocab.h"
#include "tokenizer/loader.h"

namespace fak {
namespace {

const Tokenizer& Qwen3() {
  static const Tokenizer* tok = [] {
    auto t = LoadTokenizer("../shared/fixtures/tokenizers/qwen3");
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return new Tokenizer(std::move(t).value());
  }();
  return *tok;
}

std::shared_ptr<grammar::Automaton> Compile(const std::string& text) {
  static auto trie = grammar::BuildTokenTrie(Qwen3(), {});
  auto g = grammar::Grammar::Parse(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::make_shared<grammar::Automaton>(std::make_shared<const grammar::Grammar>(std::move(*g)), trie);
}

// Runs the decoder on random logits (and `forced` tokens first, each as a one-hot row).
std::string Decode(RequestDecoder& dec, std::mt19937& rng, std::vector<int32_t> forced = {}) {
  std::string text;
  std::normal_distribution<float> n(0, 3);
  std::vector<float> logits(static_cast<size_t>(Qwen3().vocab_size()));
  for (size_t step = 0; !dec.done() && step < 400; ++step) {
    if (step < forced.size()) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      logits[static_cast<size_t>(forced[step])] = 100.0f;
    } else {
      for (auto& x : logits) x = n(rng);
    }
    auto out = dec.Step(logits);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok()) break;
    text += *out;
  }
  return text;
}

TEST(DecoderGrammar, OnlyAllowedTokensAndAnEndWhenComplete) {
  std::mt19937 rng(11);
  for (int i = 0; i < 20; ++i) {
    DecodeLimits lim;
    lim.max_tokens = 200;
    lim.grammar = Compile("root ::= (\"yes\" | \"no\" | \"maybe\") \" \" [0-9]{1,3} \"!\"");
    SamplingParams sp;
    sp.temperature = i % 2 == 0 ? 0.0f : 1.0f;
    sp.seed = static_cast<uint64_t>(i);
    RequestDecoder dec(Qwen3(), {}, sp, lim, {1, 2, 3});
    const std::string text = Decode(dec, rng);
    EXPECT_TRUE(std::regex_match(text, std::regex("(yes|no|maybe) [0-9]{1,3}!"))) << text;
    EXPECT_EQ(dec.stop_reason(), "grammar") << text;
  }
}

TEST(DecoderGrammar, TriggerStartsTheGrammarInsideFreeText) {
  const int32_t call = Qwen3().FindToken("<tool_call>");
  ASSERT_GE(call, 0);
  const auto hello = Qwen3().Encode("Hello", EncodeOptions{.add_special = false});
  ASSERT_TRUE(hello.ok());
  std::mt19937 rng(5);
  for (int i = 0; i < 10; ++i) {
    DecodeLimits lim;
    lim.max_tokens = 300;
    lim.grammar = Compile("root ::= \"\\n{\\\"n\\\": \" [0-9]{1,4} \"}\\n</tool_call>\"");
    lim.grammar_trigger = "<tool_call>";
    SamplingParams sp;
    sp.temperature = 1.0f;
    sp.seed = static_cast<uint64_t>(i);
    RequestDecoder dec(Qwen3(), {}, sp, lim, {1, 2, 3});
    std::vector<int32_t> forced = *hello;
    forced.push_back(call);
    const std::string text = Decode(dec, rng, forced);
    EXPECT_TRUE(std::regex_match(text, std::regex("Hello<tool_call>\n\\{\"n\": [0-9]{1,4}\\}\n</tool_call>")))
        << text;
    EXPECT_EQ(dec.stop_reason(), "grammar");
  }
}

}  // namespace
}  // namespace fak
