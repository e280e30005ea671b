// Text generation on a session: encode, prefill, then sample and decode token by token, streaming
// text that never splits a UTF-8 character and stopping at EOS, a stop string or the token limit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace fak {

struct GenerateOptions {
  int64_t max_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop;  // generation ends before any of these strings
  bool ignore_eos = false;
  std::shared_ptr<grammar::Automaton> grammar;  // constrained decoding (null: free)
  // Receives the logits of every generated position, in order, before its token is chosen (a logits
  // dump streams them to a file); an error stops generation.
  std::function<Status(std::span<const float> logits)> on_logits;
  // Receives text as it becomes final; return false to stop early.
  std::function<bool(const std::string& text)> on_text;
  // Text is each token's bytes as they come, for a terminal (DecodeLimits::raw_text).
  bool raw_text = false;
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::string text;
  std::string stop_reason;           // "eos", "stop", "length", "context", "callback"
  int64_t cached_prompt_tokens = 0;  // prompt tokens reused from the session
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// Generates from token ids already in hand. Whatever prefix of them the session already holds is
// reused, the rest is prefilled.
Result<GenerateResult> GenerateFromIds(Session& session, const Tokenizer& tokenizer,
                                       std::vector<int32_t> prompt, const GenerateOptions& options);

}  // namespace fak
