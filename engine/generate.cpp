#include "engine/generate.h"

#include <algorithm>

#include "core/timer.h"
#include "engine/decoder.h"

namespace fak {

Result<GenerateResult> GenerateFromIds(Session& session, const Tokenizer& tokenizer,
                                       std::vector<int32_t> prompt, const GenerateOptions& options) {
  DecodeLimits limits{options.max_tokens, options.stop, options.ignore_eos,
                      options.grammar,    "",           options.raw_text};
  FAK_RETURN_IF_ERROR(RequestDecoder::Validate(options.sampling, limits));
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
  common =
      static_cast<size_t>(session.position());  // a recurrent model's state cannot be cut: it starts over
  FAK_RETURN_IF_ERROR(session.Prefill(std::span<const int32_t>(prompt).subspan(common), logits.data()));
  r.cached_prompt_tokens = static_cast<int64_t>(common);
  r.prefill_seconds = t.Seconds();

  RequestDecoder dec(tokenizer, session.model().config.eos_token_ids, options.sampling, limits, prompt);
  t.Reset();
  bool cancelled = false;
  while (!dec.done()) {
    if (options.on_logits) FAK_RETURN_IF_ERROR(options.on_logits(logits));
    FAK_ASSIGN_OR_RETURN(std::string text, dec.Step(logits));
    r.text += text;
    if (options.on_text && !text.empty() && !options.on_text(text)) {
      cancelled = true;
      break;
    }
    if (dec.done()) break;
    if (session.position() >= session.max_context()) {
      std::string rest = dec.EndAtContext();
      r.text += rest;
      if (options.on_text && !rest.empty()) options.on_text(rest);
      break;
    }
    FAK_RETURN_IF_ERROR(session.Step(dec.next_token(), logits.data()));
  }
  r.output_ids = dec.output_ids();
  r.stop_reason = cancelled ? "callback" : dec.stop_reason();
  r.decode_seconds = t.Seconds();
  return r;
}

}  // namespace fak
