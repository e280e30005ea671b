// A request's output side, one step at a time: sample a token from the last logits, detokenize it,
// hold back text that may begin a stop string, and decide when the request is done (EOS, a stop
// string, the token limit, the context). The batched runtime and the single-sequence generate loop
// both drive it, so a request decodes the same whichever runs it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/sampler.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace fak {

struct DecodeLimits {
  int64_t max_tokens = 128;
  std::vector<std::string> stop;  // generation ends before any of these strings
  bool ignore_eos = false;
  // Constrained decoding: only tokens the grammar allows are sampled, and the request ends ("grammar")
  // when the grammar is complete and nothing may follow. With a trigger, output is free until the
  // trigger text appears, and the grammar constrains what follows it (a tool call inside free text).
  std::shared_ptr<grammar::Automaton> grammar;
  std::string grammar_trigger;
  // Text is each token's bytes as they come (a terminal stream, as llama.cpp's CLI writes it), not held
  // back until characters are complete (Detokenizer's `raw`).
  bool raw_text = false;
};

class RequestDecoder {
 public:
  // eos_ids: the model's end-of-sequence ids besides the tokenizer's.
  RequestDecoder(const Tokenizer& tokenizer, std::vector<int64_t> eos_ids, const SamplingParams& sampling,
                 DecodeLimits limits, std::vector<int32_t> prompt);
  // Checks sampling parameters and stop strings.
  static Status Validate(const SamplingParams& sampling, const DecodeLimits& limits);

  // Consumes the logits of the position just run (modified in place by penalties). Returns the
  // text that became final; afterwards either done() or next_token() is the token to run.
  Result<std::string> Step(std::span<float> logits);
  // Ends the request at the context limit (the caller cannot run next_token()).
  std::string EndAtContext();

  bool done() const { return !stop_reason_.empty(); }
  int32_t next_token() const { return next_; }
  // "eos", "stop", "length", "context", "grammar" (the grammar is complete)
  const std::string& stop_reason() const { return stop_reason_; }
  const std::vector<int32_t>& output_ids() const { return output_; }

 private:
  std::string Finish(std::string reason);

  const Tokenizer& tokenizer_;
  std::vector<int64_t> eos_ids_;
  DecodeLimits limits_;
  Sampler sampler_;
  Detokenizer detok_;
  std::vector<int32_t> history_;  // prompt and output
  std::vector<int32_t> output_;
  std::string pending_;  // decoded but not yet final (may begin a stop string)
  std::string stop_reason_;
  std::unique_ptr<grammar::Matcher> matcher_;  // null: unconstrained, or the trigger has not appeared
  std::string scanned_;                        // the output's last bytes while waiting for the trigger
  int32_t next_ = -1;
  uint64_t step_ = 0;
};

}  // namespace fak
