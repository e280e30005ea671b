// A session: one sequence of a runtime, run alone. Prefill runs the prompt in chunks through the
// matrix-matrix kernels; each decode step runs one token through the matrix-vector kernels. The
// runtime's other sequences (and other sessions over it) share its KV pool.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "engine/runtime.h"

namespace fak {

struct SessionOptions {
  int64_t prefill_chunk = 0;  // rows per forward pass while prefilling; 0: the backend's PrefillRows()
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> Create(Runtime& runtime, SessionOptions options = {});
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Appends tokens to the context. Writes the last token's logits (vocab floats) into `logits`, or,
  // with all_logits, every token's logits (tokens.size() * vocab floats).
  Status Prefill(std::span<const int32_t> tokens, float* logits, bool all_logits = false);
  // One decode step: appends `token`, writes its logits.
  Status Step(int32_t token, float* logits);

  int64_t position() const { return seq_->size(); }
  // The token ids in context, in order.
  const std::vector<int32_t>& tokens() const { return seq_->tokens(); }
  int64_t max_context() const { return runtime_.max_context(); }
  int64_t vocab_size() const { return runtime_.vocab_size(); }
  const Model& model() const { return runtime_.model(); }
  Runtime& runtime() { return runtime_; }
  Sequence& sequence() { return *seq_; }
  // Drops positions >= n (n = 0 starts over).
  void Truncate(int64_t n) { seq_->Truncate(n); }

 private:
  Session(Runtime& runtime, SessionOptions options, std::unique_ptr<Sequence> seq)
      : runtime_(runtime), options_(options), seq_(std::move(seq)) {}

  Runtime& runtime_;
  SessionOptions options_;
  std::unique_ptr<Sequence> seq_;
};

}  // namespace fak
