#include "engine/generate.h"

#include <algorithm>

#include "core/timer.h"

namespace fak {
namespace {

// Length of the longest suffix of `text` that is a proper prefix of some stop string: that much text
// must be held back until the next token decides it.
size_t HeldBack(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const auto& s : stops) {
    for (size_t n = std::min(s.size() - 1, text.size()); n > hold; --n) {
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
    }
  }
  return hold;
}

}  // namespace

Result<GenerateResult> GenerateFromIds(Session& session, const Tokenizer& tokenizer, std::vector<int32_t> prompt,
                                       const GenerateOptions& options) {
  FAK_RETURN_IF_ERROR(options.sampling.Validate());
  for (const auto& s : options.stop) {
    if (s.empty()) return InvalidArgument("stop strings must not be empty");
  }
  if (prompt.empty()) return InvalidArgument("the prompt encodes to no tokens");
  GenerateResult r;
  r.prompt_ids = prompt;
  const int64_t vocab = session.vocab_size();
  std::vector<float> logits(static_cast<size_t>(vocab));

  Timer t;
  // Reuse the longest prefix already in the session's cache; at least one token is run for logits.
  const auto& have = session.tokens();
  size_t common = 0;
  while (common < have.size() && common < prompt.size() && have[common] == prompt[common]) ++common;
  if (common == prompt.size()) --common;
  session.Truncate(static_cast<int64_t>(common));
  FAK_RETURN_IF_ERROR(session.Prefill(std::span<const int32_t>(prompt).subspan(common), logits.data()));
  r.cached_prompt_tokens = static_cast<int64_t>(common);
  r.prefill_seconds = t.Seconds();

  Sampler sampler(options.sampling);
  Detokenizer detok(tokenizer);
  std::vector<int32_t> history = prompt;
  std::string pending;  // decoded but not yet emitted (may begin a stop string)
  bool done = false;
  t.Reset();
  auto emit = [&](const std::string& s) {
    r.text += s;
    if (options.on_text && !s.empty() && !options.on_text(s)) {
      r.stop_reason = "callback";
      done = true;
    }
  };
  for (int64_t i = 0; i < options.max_tokens && !done; ++i) {
    if (options.collect_logits) r.logits.insert(r.logits.end(), logits.begin(), logits.end());
    const int32_t tok = sampler.Sample(logits, history, static_cast<uint64_t>(i));
    const bool eos = !options.ignore_eos && (tok == tokenizer.eos_id() ||
                                             std::find(session.model().config.eos_token_ids.begin(),
                                                       session.model().config.eos_token_ids.end(),
                                                       tok) != session.model().config.eos_token_ids.end());
    if (eos) {
      r.stop_reason = "eos";
      break;
    }
    r.output_ids.push_back(tok);
    history.push_back(tok);
    std::string piece;
    if (tok < tokenizer.vocab_size()) FAK_RETURN_IF_ERROR(detok.Push(tok, &piece));
    pending += piece;
    // A stop string ends the text before it.
    size_t cut = std::string::npos;
    for (const auto& s : options.stop) cut = std::min(cut, pending.find(s));
    if (cut != std::string::npos) {
      emit(pending.substr(0, cut));
      r.stop_reason = "stop";
      break;
    }
    const size_t hold = HeldBack(pending, options.stop);
    emit(pending.substr(0, pending.size() - hold));
    pending.erase(0, pending.size() - hold);
    if (done) break;
    if (i + 1 == options.max_tokens) {
      r.stop_reason = "length";
      break;
    }
    if (session.position() >= session.max_context()) {
      r.stop_reason = "context";
      break;
    }
    FAK_RETURN_IF_ERROR(session.Step(tok, logits.data()));
  }
  if (r.stop_reason.empty()) r.stop_reason = "length";
  if (r.stop_reason != "stop" && r.stop_reason != "callback") {
    detok.Flush(&pending);
    emit(pending);
  }
  r.decode_seconds = t.Seconds();
  return r;
}

}  // namespace fak
