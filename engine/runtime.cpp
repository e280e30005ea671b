#include "engine/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace fak {

Sequence::~Sequence() {
  if (state_slot_ >= 0) rt_->GiveStateSlot(state_slot_);
}

SequenceSnapshot::~SequenceSnapshot() {
  if (state_slot_ >= 0) rt_->GiveStateSlot(state_slot_);
}

void Sequence::Truncate(int64_t n) {
  // A recurrent state cannot be rewound: cutting into it starts the sequence over.
  if (state_slot_ >= 0 && n < kv_.size()) {
    n = 0;
    rt_->backend_->ClearState(rt_->states_, state_slot_);
  }
  kv_.Truncate(n);
  tokens_.resize(static_cast<size_t>(kv_.size()));
}

void Sequence::Adopt(const Sequence& other, int64_t n) {
  if (state_slot_ >= 0) {
    // Only the whole of `other` carries a matching state.
    if (n < other.size()) {
      Truncate(0);
      return;
    }
    rt_->backend_->CopyState(rt_->states_, other.state_slot_, state_slot_);
  }
  kv_.Adopt(other.kv_, n);
  tokens_.assign(other.tokens_.begin(), other.tokens_.begin() + kv_.size());
}

// Finds the first stage of a forward pass whose output holds NaN or infinity.
class FiniteProbe final : public ForwardProbe {
 public:
  explicit FiniteProbe(Backend& be) : be_(be) {}
  void Reset() { finding_.clear(); }
  const std::string& Finding() const { return finding_; }

  void After(const char* stage, int64_t layer, Tensor x) override {
    if (!finding_.empty() || x.rows == 0) return;
    host_.resize(static_cast<size_t>(x.rows * x.cols));
    be_.Download(x, host_.data());
    if (!be_.Synchronize().ok()) return;
    for (size_t i = 0; i < host_.size(); ++i) {
      if (std::isfinite(host_[i])) continue;
      const std::string where =
          layer < 0 ? fmt::format("the {}", stage) : fmt::format("layer {}'s {} block", layer, stage);
      finding_ = fmt::format("{} output is the first that is not finite ({} at row {}, column {})", where,
                             host_[i], i / static_cast<size_t>(x.cols), i % static_cast<size_t>(x.cols));
      return;
    }
  }

 private:
  Backend& be_;
  std::vector<float> host_;
  std::string finding_;
};

namespace {

// The first non-finite value of n floats, or -1; written so the loop vectorizes (no early exit).
int64_t FirstNonFinite(const float* v, int64_t n) {
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    any |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  if (any == 0) return -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) return i;
  }
  return -1;
}

}  // namespace

Runtime::Runtime(const Model& model, int64_t max_context) : model_(model), max_context_(max_context) {}

Result<std::unique_ptr<Runtime>> Runtime::Create(const Model& model, const RuntimeOptions& o,
                                                 Backend* backend) {
  const Architecture* arch = FindArchitecture(model.config.arch);
  if (arch == nullptr) {
    return Unsupported("architecture '{}' has no forward pass in fak yet", model.config.arch);
  }
  if (o.max_context <= 0 || o.page_tokens <= 0 || o.max_sequences <= 0 || o.kv_pages < 0) {
    return InvalidArgument("runtime: context, page size and sequence count must be positive");
  }
  if (o.max_snapshots < 0) return InvalidArgument("runtime: max_snapshots must not be negative");
  size_t state_bytes = 0;
  int64_t kv_layers = 0;
  for (const LayerCache& lc : arch->caches(model.config)) {
    if (lc.kind == LayerCache::kState) state_bytes += lc.state_bytes;
    if (lc.kind == LayerCache::kKv) ++kv_layers;
  }
  if (kv_layers == 0) return Unsupported("architecture '{}' has no attention layers", model.config.arch);
  int64_t ctx = o.max_context;
  if (model.config.max_context > 0) ctx = std::min(ctx, model.config.max_context);
  auto rt = std::unique_ptr<Runtime>(new Runtime(model, ctx));
  if (backend == nullptr) {
    FAK_ASSIGN_OR_RETURN(rt->owned_backend_, CreateBackend(o.backend));
    backend = rt->owned_backend_.get();
  }
  rt->backend_ = backend;
  rt->state_bytes_ = state_bytes;
  if (state_bytes > 0) {
    const int64_t slots = o.max_sequences + o.max_snapshots;
    FAK_ASSIGN_OR_RETURN(rt->states_, backend->CreateStates(state_bytes, slots));
    for (int64_t s = slots - 1; s >= 0; --s) rt->free_slots_.push_back(s);
  }
  FAK_ASSIGN_OR_RETURN(rt->arch_, arch->instantiate(model, *backend));
  if (o.check_finite) {
    rt->finite_probe_ = std::make_unique<FiniteProbe>(*backend);
    rt->arch_->set_probe(rt->finite_probe_.get());
  }
  const int64_t per_seq = (ctx + o.page_tokens - 1) / o.page_tokens;
  const int64_t pages = o.kv_pages > 0 ? o.kv_pages : per_seq * o.max_sequences;
  const ModelConfig& c = model.config;
  FAK_ASSIGN_OR_RETURN(
      rt->kv_, KvPagePool::Create(
                   *backend, KvGeometry{kv_layers, c.n_kv_head, c.head_dim, o.page_tokens, o.kv_f32}, pages));
  return rt;
}

Runtime::~Runtime() {
  if (logits_.data != nullptr) backend_->Free(logits_);
}

Result<int64_t> Runtime::TakeStateSlot() {
  if (free_slots_.empty()) {
    return OutOfRange("every recurrent-state slot is in use (raise max_sequences or max_snapshots)");
  }
  const int64_t s = free_slots_.back();
  free_slots_.pop_back();
  return s;
}

void Runtime::GiveStateSlot(int64_t slot) { free_slots_.push_back(slot); }

Result<std::unique_ptr<Sequence>> Runtime::NewSequence() {
  auto seq = std::unique_ptr<Sequence>(new Sequence(this, kv_.get()));
  if (state_bytes_ > 0) {
    FAK_ASSIGN_OR_RETURN(seq->state_slot_, TakeStateSlot());
    backend_->ClearState(states_, seq->state_slot_);
  }
  return seq;
}

Result<std::unique_ptr<SequenceSnapshot>> Runtime::Snapshot(const Sequence& seq) {
  auto snap = std::unique_ptr<SequenceSnapshot>(new SequenceSnapshot(this, kv_.get()));
  if (state_bytes_ > 0) {
    FAK_ASSIGN_OR_RETURN(snap->state_slot_, TakeStateSlot());
    backend_->CopyState(states_, seq.state_slot_, snap->state_slot_);
  }
  snap->kv_.Adopt(seq.kv_, seq.size());
  snap->tokens_ = seq.tokens_;
  return snap;
}

void Runtime::Restore(Sequence& seq, const SequenceSnapshot& snap) {
  if (state_bytes_ > 0) backend_->CopyState(states_, snap.state_slot_, seq.state_slot_);
  seq.kv_.Adopt(snap.kv_, snap.size());
  seq.tokens_ = snap.tokens_;
}

Status Runtime::Forward(std::span<const SeqWork> work) {
  if (work.empty()) return InvalidArgument("forward pass with no sequences");
  const int64_t vocab = model_.config.vocab_size;
  int64_t n_rows = 0, n_out = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    const SeqWork& w = work[i];
    if (w.seq == nullptr || w.tokens.empty()) {
      return InvalidArgument("forward pass with an empty sequence entry");
    }
    for (size_t j = 0; j < i; ++j) {
      if (work[j].seq == w.seq) return InvalidArgument("a sequence appears twice in one batch");
    }
    const int64_t n = static_cast<int64_t>(w.tokens.size());
    if (w.seq->size() + n > max_context_) {
      return OutOfRange("prompt of {} tokens (after {} in context) exceeds the context length {}", n,
                        w.seq->size(), max_context_);
    }
    for (int32_t t : w.tokens) {
      if (t < 0 || t >= vocab) {
        return OutOfRange("token id {} is outside the model's vocabulary of {}", t, vocab);
      }
    }
    n_rows += n;
    if (w.logits != nullptr) n_out += w.all_logits ? n : 1;
  }
  // Pages first: a full pool fails here and gives back what this batch took.
  for (size_t i = 0; i < work.size(); ++i) {
    Status s = work[i].seq->kv_.Reserve(work[i].seq->size() + static_cast<int64_t>(work[i].tokens.size()));
    if (!s.ok()) {
      for (size_t j = 0; j <= i; ++j) work[j].seq->kv_.Truncate(work[j].seq->size());
      return s;
    }
  }
  tokens_.clear();
  positions_.clear();
  row_seq_.clear();
  page_begin_.assign(1, 0);
  pages_.clear();
  out_rows_.clear();
  seq_state_.clear();
  int64_t max_ctx = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    const SeqWork& w = work[i];
    const int64_t pos0 = w.seq->size(), n = static_cast<int64_t>(w.tokens.size());
    const int64_t row0 = static_cast<int64_t>(tokens_.size());
    for (int64_t t = 0; t < n; ++t) {
      tokens_.push_back(w.tokens[static_cast<size_t>(t)]);
      positions_.push_back(static_cast<int32_t>(pos0 + t));
      row_seq_.push_back(static_cast<int32_t>(i));
      if (w.logits != nullptr && (w.all_logits || t == n - 1)) {
        out_rows_.push_back(static_cast<int32_t>(row0 + t));
      }
    }
    const auto& pg = w.seq->kv_.pages();
    pages_.insert(pages_.end(), pg.begin(), pg.end());
    page_begin_.push_back(static_cast<int32_t>(pages_.size()));
    if (state_bytes_ > 0) seq_state_.push_back(static_cast<int32_t>(w.seq->state_slot_));
    max_ctx = std::max(max_ctx, pos0 + n);
  }
  bool forwarded = false;
  Status s = arch_->Reserve(n_rows, std::max<int64_t>(n_out, 1));
  if (s.ok() && n_out > logits_rows_) {
    if (logits_.data != nullptr) backend_->Free(logits_);
    logits_ = {};
    logits_rows_ = 0;
    auto t = backend_->Alloc(n_out, vocab);
    if (t.ok()) {
      logits_ = *t;
      logits_rows_ = n_out;
    } else {
      s = t.status();
    }
  }
  if (s.ok()) {
    Backend& be = *backend_;
    const BatchPlan plan{tokens_, positions_, row_seq_, page_begin_, pages_, out_rows_, max_ctx, seq_state_};
    be.SetBatch(plan);
    if (finite_probe_) finite_probe_->Reset();
    forwarded = true;
    arch_->Forward(plan, kv_->store(), states_, logits_.data != nullptr ? logits_ : Tensor{});
    // Non-finite logits mean broken weights or configuration (a NaN norm weight, an infinite scale):
    // refuse them rather than sample token 0 forever. The backend checks them where they are; the
    // host copies are scanned only to name the first bad value.
    bool finite = true;
    if (n_out > 0) be.CheckFinite(logits_.Rows(0, n_out), &finite);
    int64_t out = 0;
    for (const SeqWork& w : work) {
      if (w.logits == nullptr) continue;
      const int64_t k = w.all_logits ? static_cast<int64_t>(w.tokens.size()) : 1;
      be.Download(logits_.Rows(out, k), w.logits);
      out += k;
    }
    s = be.Synchronize();
    if (s.ok() && finite_probe_ && !finite_probe_->Finding().empty()) {
      s = Corrupt(
          "non-finite values in the forward pass: {}; the model's weights or configuration are "
          "broken there",
          finite_probe_->Finding());
    }
    for (const SeqWork& w : work) {
      if (!s.ok() || finite || w.logits == nullptr) continue;
      const int64_t k = w.all_logits ? static_cast<int64_t>(w.tokens.size()) : 1;
      if (const int64_t bad = FirstNonFinite(w.logits, k * vocab); bad >= 0) {
        s = Corrupt(
            "the forward pass produced non-finite logits ({} for token {} at row {}): the model's "
            "weights or configuration hold non-finite values (check_finite, fak run --check-finite, "
            "names the first layer)",
            w.logits[bad], bad % vocab, bad / vocab);
      }
    }
  }
  if (!s.ok()) {
    for (const SeqWork& w : work) {
      w.seq->kv_.Truncate(w.seq->size());  // nothing half-written stays
      // A recurrent state the failed pass advanced cannot be taken back: those sequences start over
      // (cleared even when they were empty, since the pass may have written their state).
      if (forwarded && state_bytes_ > 0) {
        w.seq->Truncate(0);
        backend_->ClearState(states_, w.seq->state_slot_);
      }
    }
    return s;
  }
  for (const SeqWork& w : work) {
    w.seq->kv_.Commit(w.seq->size() + static_cast<int64_t>(w.tokens.size()));
    w.seq->tokens_.insert(w.seq->tokens_.end(), w.tokens.begin(), w.tokens.end());
  }
  return Status::Ok();
}

}  // namespace fak
