#include "engine/session.h"

#include <algorithm>

namespace fak {

Result<std::unique_ptr<Session>> Session::Create(const Model& model, cpu::ThreadPool& pool, SessionOptions options) {
  const Architecture* arch = FindArchitecture(model.config.arch);
  if (arch == nullptr) return Unsupported("architecture '{}' has no forward pass in fak yet", model.config.arch);
  if (options.max_context <= 0 || options.prefill_chunk <= 0 || options.page_tokens <= 0) {
    return InvalidArgument("session: context, chunk and page sizes must be positive");
  }
  int64_t ctx = options.max_context;
  if (model.config.max_context > 0) ctx = std::min(ctx, model.config.max_context);
  return std::unique_ptr<Session>(new Session(model, arch, pool, options, ctx));
}

Session::Session(const Model& model, const Architecture* arch, cpu::ThreadPool& pool, SessionOptions options,
                 int64_t max_context)
    : model_(model),
      arch_(arch),
      pool_(pool),
      options_(options),
      max_context_(max_context),
      kv_pool_(KvGeometry{model.config.n_layer, model.config.n_kv_head, model.config.head_dim, options.page_tokens,
                          options.kv_f32},
               (max_context + options.page_tokens - 1) / options.page_tokens),
      kv_(&kv_pool_) {}

Status Session::Prefill(std::span<const int32_t> tokens, float* logits, bool all_logits) {
  if (tokens.empty()) return InvalidArgument("prefill with an empty prompt");
  if (position() + static_cast<int64_t>(tokens.size()) > max_context_) {
    return OutOfRange("prompt of {} tokens (after {} in context) exceeds the context length {}", tokens.size(),
                      position(), max_context_);
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= model_.config.vocab_size) {
      return OutOfRange("token id {} is outside the model's vocabulary of {}", t, model_.config.vocab_size);
    }
  }
  const int64_t vocab = model_.config.vocab_size;
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t i = 0; i < n; i += options_.prefill_chunk) {
    const int64_t len = std::min(options_.prefill_chunk, n - i);
    const bool last = i + len == n;
    ForwardRequest req{tokens.subspan(static_cast<size_t>(i), static_cast<size_t>(len)), all_logits,
                       nullptr};
    std::vector<float> discard;
    if (all_logits) {
      req.logits = logits + i * vocab;
    } else if (last) {
      req.logits = logits;
    } else {
      discard.resize(static_cast<size_t>(vocab));
      req.logits = discard.data();
    }
    Status s = arch_->forward(model_, kv_, req, scratch_, pool_);
    if (!s.ok()) {
      kv_.Truncate(position());  // nothing half-written stays behind
      tokens_.resize(static_cast<size_t>(position()));
      return s;
    }
    tokens_.insert(tokens_.end(), req.tokens.begin(), req.tokens.end());
  }
  return Status::Ok();
}

void Session::Truncate(int64_t n) {
  kv_.Truncate(n);
  tokens_.resize(static_cast<size_t>(kv_.size()));
}

Status Session::Step(int32_t token, float* logits) { return Prefill(std::span<const int32_t>(&token, 1), logits); }

}  // namespace fak
