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
  bool kv_f32 = false;         // f32 keys and values (exact comparisons with f32 references); default f16
  int64_t max_snapshots = 16;  // state slots for snapshots, for architectures with recurrent layers
  // Checks every layer's output for NaN and infinity and fails a forward pass naming the first one
  // that has them (a debugging aid: it copies every activation to the host). Non-finite logits are
  // refused either way.
  bool check_finite = false;
  BackendOptions backend;  // the backend the runtime makes when none is given to Create
};

class Runtime;
class FiniteProbe;

// A sequence's context frozen at one point: its tokens, its KV pages by reference (copy-on-write
// keeps them unchanged while the sequence goes on) and a copy of its recurrent state slot, if the
// architecture has one. Restoring it continues exactly where the sequence was, with no recompute.
// Destroy snapshots before their runtime.
class SequenceSnapshot {
 public:
  ~SequenceSnapshot();
  SequenceSnapshot(const SequenceSnapshot&) = delete;
  SequenceSnapshot& operator=(const SequenceSnapshot&) = delete;
  int64_t size() const { return kv_.size(); }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  friend class Runtime;
  SequenceSnapshot(Runtime* rt, KvPagePool* pool) : rt_(rt), kv_(pool) {}
  Runtime* rt_;
  KvSequence kv_;
  std::vector<int32_t> tokens_;
  int64_t state_slot_ = -1;
};

// One sequence's tokens and its pages in the shared pool.
class Sequence {
 public:
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  int64_t size() const { return kv_.size(); }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<int32_t>& pages() const { return kv_.pages(); }
  // Forgets positions >= n. A recurrent state cannot be rewound: for architectures with one, any
  // n below size() empties the sequence (size() tells what is left).
  void Truncate(int64_t n);
  // Replaces this sequence's context with the first n tokens of `other`, sharing its pages. With a
  // recurrent state only the whole of `other` can be adopted; a shorter n empties this sequence.
  void Adopt(const Sequence& other, int64_t n);

 private:
  friend class Runtime;
  Sequence(Runtime* rt, KvPagePool* pool) : rt_(rt), kv_(pool) {}
  Runtime* rt_;
  KvSequence kv_;
  std::vector<int32_t> tokens_;
  int64_t state_slot_ = -1;  // its recurrent state, when the architecture has one
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

  // A new, empty sequence; fails when every state slot is taken (architectures with recurrent layers).
  Result<std::unique_ptr<Sequence>> NewSequence();
  // Freezes `seq` as it is now (see SequenceSnapshot).
  Result<std::unique_ptr<SequenceSnapshot>> Snapshot(const Sequence& seq);
  // Makes `seq` continue from `snap`: the snapshot's tokens, pages and state replace its own.
  void Restore(Sequence& seq, const SequenceSnapshot& snap);
  // Runs one ragged batch. Each sequence appears at most once. On any error no sequence grows and
  // no page is kept; with recurrent layers, a pass that failed after it started (non-finite logits)
  // empties its sequences, whose states it may have advanced.
  Status Forward(std::span<const SeqWork> work);

  const Model& model() const { return model_; }
  Backend& backend() { return *backend_; }
  KvPagePool& kv_pool() { return *kv_; }
  int64_t max_context() const { return max_context_; }
  int64_t vocab_size() const { return model_.config.vocab_size; }
  // Bytes of recurrent state per sequence (0 when every layer keeps KV pages).
  size_t state_bytes() const { return state_bytes_; }
  // Recurrent-state slots not held by a sequence or a snapshot.
  int64_t free_state_slots() const { return static_cast<int64_t>(free_slots_.size()); }

 private:
  friend class Sequence;
  friend class SequenceSnapshot;
  Result<int64_t> TakeStateSlot();
  void GiveStateSlot(int64_t slot);

  Runtime(const Model& model, int64_t max_context);

  const Model& model_;
  int64_t max_context_;
  std::unique_ptr<Backend> owned_backend_;
  Backend* backend_ = nullptr;
  std::unique_ptr<ArchInstance> arch_;
  std::unique_ptr<FiniteProbe> finite_probe_;  // with check_finite
  std::unique_ptr<KvPagePool> kv_;
  size_t state_bytes_ = 0;
  int32_t states_ = -1;  // the backend's state store: max_sequences + max_snapshots slots
  std::vector<int64_t> free_slots_;
  Tensor logits_;  // (logits_rows_, vocab)
  int64_t logits_rows_ = 0;
  // The batch being built (reused).
  std::vector<int32_t> tokens_, positions_, row_seq_, page_begin_, pages_, out_rows_, seq_state_;
};

}  // namespace fak
