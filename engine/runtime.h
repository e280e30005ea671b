// The batched runtime: one loaded model on one backend, one KV page pool shared by every sequence,
// and a forward pass over a ragged batch — any mix of prefill chunks and single decode tokens from
// many sequences, every row through each weight matrix once.
//
// Batch invariance: a sequence's logits do not depend on what else is in the batch, where it sits
// in it, or how its prompt was chunked; every op reduces each row in a fixed order.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "engine/arch/arch.h"
#include "engine/kv_cache.h"
#include "engine/model.h"
#include "ops/backend.h"

namespace fak {

struct RuntimeOptions {
  int64_t max_context = 4096;  // per sequence; capped by the model's own context length
  int64_t max_sequences = 1;   // sizes the KV pool when kv_pages is 0
  int64_t kv_pages = 0;        // pages in the shared pool; 0: max_sequences * max_context worth
  int64_t page_tokens = 16;
  bool kv_f32 = false;     // f32 keys and values (exact comparisons with f32 references); default f16
  BackendOptions backend;  // the backend the runtime makes when none is given to Create
};

class Runtime;

// One sequence's tokens and its pages in the shared pool.
class Sequence {
 public:
  ~Sequence() = default;
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  int64_t size() const { return kv_.size(); }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<int32_t>& pages() const { return kv_.pages(); }
  // Forgets positions >= n.
  void Truncate(int64_t n);
  // Replaces this sequence's context with the first n tokens of `other`, sharing its pages.
  void Adopt(const Sequence& other, int64_t n);

 private:
  friend class Runtime;
  explicit Sequence(KvPagePool* pool) : kv_(pool) {}
  KvSequence kv_;
  std::vector<int32_t> tokens_;
};

// One sequence's part of a batch: its next tokens, and where its logits go.
struct SeqWork {
  Sequence* seq = nullptr;
  std::span<const int32_t> tokens;  // appended at positions seq->size() ..
  bool all_logits = false;          // logits for every token, else only the last
  float* logits = nullptr;          // host (all_logits ? tokens.size() : 1, vocab); null: none wanted
};

class Runtime {
 public:
  // Over a backend the caller owns, or (backend null) a new one made from options.backend.
  static Result<std::unique_ptr<Runtime>> Create(const Model& model, const RuntimeOptions& options = {},
                                                 Backend* backend = nullptr);
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  ~Runtime();

  std::unique_ptr<Sequence> NewSequence();
  // Runs one ragged batch. Each sequence appears at most once. On any error nothing changes: no
  // sequence grows and no page is kept.
  Status Forward(std::span<const SeqWork> work);

  const Model& model() const { return model_; }
  Backend& backend() { return *backend_; }
  KvPagePool& kv_pool() { return *kv_; }
  int64_t max_context() const { return max_context_; }
  int64_t vocab_size() const { return model_.config.vocab_size; }

 private:
  Runtime(const Model& model, int64_t max_context) : model_(model), max_context_(max_context) {}

  const Model& model_;
  int64_t max_context_;
  std::unique_ptr<Backend> owned_backend_;
  Backend* backend_ = nullptr;
  std::unique_ptr<ArchInstance> arch_;
  std::unique_ptr<KvPagePool> kv_;
  Tensor logits_;  // (logits_rows_, vocab)
  int64_t logits_rows_ = 0;
  // The batch being built (reused).
  std::vector<int32_t> tokens_, positions_, row_seq_, page_begin_, pages_, out_rows_;
};

}  // namespace fak
