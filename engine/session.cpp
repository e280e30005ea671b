#include "engine/session.h"

#include <algorithm>

namespace fak {

Result<std::unique_ptr<Session>> Session::Create(Runtime& runtime, SessionOptions options) {
  if (options.prefill_chunk < 0) return InvalidArgument("session: the prefill chunk must not be negative");
  if (options.prefill_chunk == 0) options.prefill_chunk = runtime.backend().PrefillRows();
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<Sequence> seq, runtime.NewSequence());
  return std::unique_ptr<Session>(new Session(runtime, options, std::move(seq)));
}

Status Session::Prefill(std::span<const int32_t> tokens, float* logits, bool all_logits) {
  if (tokens.empty()) return InvalidArgument("prefill with an empty prompt");
  if (position() + static_cast<int64_t>(tokens.size()) > max_context()) {
    return OutOfRange("prompt of {} tokens (after {} in context) exceeds the context length {}",
                      tokens.size(), position(), max_context());
  }
  const int64_t vocab = vocab_size();
  for (int32_t t : tokens) {
    if (t < 0 || t >= vocab) {
      return OutOfRange("token id {} is outside the model's vocabulary of {}", t, vocab);
    }
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t i = 0; i < n; i += options_.prefill_chunk) {
    const int64_t len = std::min(options_.prefill_chunk, n - i);
    SeqWork w{seq_.get(), tokens.subspan(static_cast<size_t>(i), static_cast<size_t>(len)), all_logits,
              nullptr};
    if (all_logits) {
      w.logits = logits + i * vocab;
    } else if (i + len == n) {
      w.logits = logits;
    }
    FAK_RETURN_IF_ERROR(runtime_.Forward(std::span<const SeqWork>(&w, 1)));
  }
  return Status::Ok();
}

Status Session::Step(int32_t token, float* logits) {
  return Prefill(std::span<const int32_t>(&token, 1), logits);
}

}  // namespace fak
