#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <span>

namespace fak {
namespace {

// log-softmax of one row, in double.
void LogSoftmax(std::span<const float> row, std::vector<double>* out) {
  out->resize(row.size());
  double mx = row[0];
  for (float x : row) mx = std::max(mx, static_cast<double>(x));
  double sum = 0;
  for (float x : row) sum += std::exp(static_cast<double>(x) - mx);
  const double lse = mx + std::log(sum);
  for (size_t i = 0; i < row.size(); ++i) (*out)[i] = static_cast<double>(row[i]) - lse;
}

}  // namespace

Result<PerplexityResult> ComputePerplexity(Session& model, const std::vector<int32_t>& tokens,
                                           const PerplexityOptions& o, Session* base) {
  if (o.ctx < 8) {
    return InvalidArgument("the context for perplexity must be at least 8 tokens, not {}", o.ctx);
  }
  if (o.ctx > model.max_context()) {
    return InvalidArgument("a context of {} is more than the session holds ({})", o.ctx, model.max_context());
  }
  if (static_cast<int64_t>(tokens.size()) < 2 * o.ctx) {
    return InvalidArgument("the text has {} tokens; perplexity with a context of {} needs at least {}",
                           tokens.size(), o.ctx, 2 * o.ctx);
  }
  if (base != nullptr && base->vocab_size() != model.vocab_size()) {
    return InvalidArgument("the base model's vocabulary has {} entries, the model's {}", base->vocab_size(),
                           model.vocab_size());
  }
  int64_t chunks = static_cast<int64_t>(tokens.size()) / o.ctx;
  if (o.max_chunks > 0) chunks = std::min(chunks, o.max_chunks);
  const int64_t vocab = model.vocab_size();
  const auto ctx = static_cast<size_t>(o.ctx);
  std::vector<float> logits(ctx * static_cast<size_t>(vocab)), base_logits;
  if (base != nullptr) base_logits.resize(logits.size());
  std::vector<double> lp, lq;
  PerplexityResult r;
  r.ctx = o.ctx;
  r.chunks = chunks;
  r.has_base = base != nullptr;
  double nll = 0, nll2 = 0, base_nll = 0, kl = 0, kl2 = 0;
  int64_t agree = 0;
  const size_t first = ctx / 2;
  for (int64_t c = 0; c < chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * o.ctx, tokens.begin() + (c + 1) * o.ctx);
    if (o.bos >= 0) chunk[0] = o.bos;
    model.Truncate(0);
    FAK_RETURN_IF_ERROR(model.Prefill(chunk, logits.data(), /*all_logits=*/true));
    if (base != nullptr) {
      base->Truncate(0);
      FAK_RETURN_IF_ERROR(base->Prefill(chunk, base_logits.data(), /*all_logits=*/true));
    }
    double chunk_nll = 0;
    for (size_t j = first; j + 1 < ctx; ++j) {
      const int32_t next = chunk[j + 1];
      std::span<const float> row(logits.data() + j * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
      if (o.on_scored_logits) FAK_RETURN_IF_ERROR(o.on_scored_logits(row));
      LogSoftmax(row, &lq);
      const double v = -lq[static_cast<size_t>(next)];
      nll += v;
      nll2 += v * v;
      chunk_nll += v;
      ++r.scored;
      if (base != nullptr) {
        std::span<const float> brow(base_logits.data() + j * static_cast<size_t>(vocab),
                                    static_cast<size_t>(vocab));
        LogSoftmax(brow, &lp);
        base_nll -= lp[static_cast<size_t>(next)];
        double d = 0;
        size_t am = 0, bm = 0;
        for (size_t t = 0; t < lp.size(); ++t) {
          d += std::exp(lp[t]) * (lp[t] - lq[t]);
          if (lq[t] > lq[am]) am = t;
          if (lp[t] > lp[bm]) bm = t;
        }
        kl += d;
        kl2 += d * d;
        r.kl_max = std::max(r.kl_max, d);
        agree += am == bm;
      }
    }
    r.chunk_ppl.push_back(std::exp(chunk_nll / static_cast<double>(ctx - 1 - first)));
    if (o.progress) o.progress(c + 1, chunks, std::exp(nll / static_cast<double>(r.scored)));
  }
  const auto n = static_cast<double>(r.scored);
  const double mean = nll / n;
  r.ppl = std::exp(mean);
  const double var = nll2 / n - mean * mean;
  r.ppl_err = var > 0 && n > 1 ? r.ppl * std::sqrt(var / (n - 1)) : 0;
  if (base != nullptr) {
    r.base_ppl = std::exp(base_nll / n);
    r.kl_mean = kl / n;
    const double kv = kl2 / n - r.kl_mean * r.kl_mean;
    r.kl_err = kv > 0 && n > 1 ? std::sqrt(kv / (n - 1)) : 0;
    r.top1_agreement = static_cast<double>(agree) / n;
  }
  return r;
}

}  // namespace fak
