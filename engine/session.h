// A session: one sequence's KV cache over a loaded model. Prefill runs the prompt in chunks through
// the matrix-matrix kernels; each decode step runs one token through the matrix-vector kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "core/status.h"
#include "engine/arch/arch.h"
#include "engine/kv_cache.h"
#include "engine/model.h"

namespace fak {

struct SessionOptions {
  int64_t max_context = 4096;  // capped by the model's own context length when it declares one
  int64_t prefill_chunk = 256;
  int64_t page_tokens = 16;
  bool kv_f32 = false;  // f32 keys and values (exact comparisons with f32 references); default f16
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> Create(const Model& model, cpu::ThreadPool& pool,
                                                 SessionOptions options = {});
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Appends tokens to the context. Writes the last token's logits (vocab floats) into `logits`, or,
  // with all_logits, every token's logits (tokens.size() * vocab floats).
  Status Prefill(std::span<const int32_t> tokens, float* logits, bool all_logits = false);
  // One decode step: appends `token`, writes its logits.
  Status Step(int32_t token, float* logits);

  int64_t position() const { return kv_.size(); }
  // The token ids in context, in order.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t max_context() const { return max_context_; }
  int64_t vocab_size() const { return model_.config.vocab_size; }
  const Model& model() const { return model_; }
  // Drops positions >= n (n = 0 starts over).
  void Truncate(int64_t n);

 private:
  Session(const Model& model, const Architecture* arch, cpu::ThreadPool& pool, SessionOptions options,
          int64_t max_context);

  const Model& model_;
  const Architecture* arch_;
  cpu::ThreadPool& pool_;
  SessionOptions options_;
  int64_t max_context_;
  KvPagePool kv_pool_;
  KvSequence kv_;
  ForwardScratch scratch_;
  std::vector<int32_t> tokens_;
};

}  // namespace fak
