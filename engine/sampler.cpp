#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace fak {

Status SamplingParams::Validate() const {
  if (!(temperature >= 0) || !std::isfinite(temperature)) {
    return InvalidArgument("temperature {} must be >= 0", temperature);
  }
  if (top_k < 0) return InvalidArgument("top_k {} must be >= 0", top_k);
  if (!(top_p > 0 && top_p <= 1)) return InvalidArgument("top_p {} must be in (0, 1]", top_p);
  if (!(min_p >= 0 && min_p <= 1)) return InvalidArgument("min_p {} must be in [0, 1]", min_p);
  if (!(repetition_penalty > 0) || !std::isfinite(repetition_penalty)) {
    return InvalidArgument("repetition_penalty {} must be > 0", repetition_penalty);
  }
  if (!std::isfinite(presence_penalty) || !std::isfinite(frequency_penalty)) {
    return InvalidArgument("presence and frequency penalties must be finite");
  }
  if (penalty_window < 0) return InvalidArgument("penalty window {} must be >= 0", penalty_window);
  return Status::Ok();
}

double CounterUniform(uint64_t seed, uint64_t counter) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + counter * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

int32_t Sampler::Sample(std::span<float> logits, std::span<const int32_t> history, uint64_t step) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  if (p_.repetition_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    const size_t n = std::min(history.size(), static_cast<size_t>(p_.penalty_window));
    std::unordered_map<int32_t, int> counts;
    for (size_t i = history.size() - n; i < history.size(); ++i) ++counts[history[i]];
    for (const auto& [tok, cnt] : counts) {
      if (tok < 0 || tok >= vocab) continue;
      float& l = logits[static_cast<size_t>(tok)];
      if (p_.repetition_penalty != 1.0f) l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
      l -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(cnt);
    }
  }
  if (p_.temperature == 0.0f) return Argmax(logits);

  cand_.clear();
  cand_.reserve(logits.size());
  for (int32_t i = 0; i < vocab; ++i) cand_.emplace_back(logits[static_cast<size_t>(i)] / p_.temperature, i);
  // Sorted by logit, ties by id, so the order (and the draw) is deterministic.
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t k = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < k) {
    k = static_cast<size_t>(p_.top_k);
    std::partial_sort(cand_.begin(), cand_.begin() + static_cast<long>(k), cand_.end(), by_logit);
    cand_.resize(k);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  const float max_l = cand_[0].first;
  double sum = 0;
  std::vector<double> probs(cand_.size());
  for (size_t i = 0; i < cand_.size(); ++i) {
    probs[i] = std::exp(static_cast<double>(cand_[i].first - max_l));
    sum += probs[i];
  }
  for (auto& p : probs) p /= sum;
  size_t keep = probs.size();
  if (p_.min_p > 0) {
    const double floor = p_.min_p * probs[0];
    size_t i = 1;
    while (i < keep && probs[i] >= floor) ++i;
    keep = i;
  }
  if (p_.top_p < 1.0f) {
    double cum = 0;
    size_t i = 0;
    for (; i < keep; ++i) {
      cum += probs[i];
      if (cum >= p_.top_p) {
        ++i;
        break;
      }
    }
    keep = std::max<size_t>(1, std::min(keep, i));
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += probs[i];
  double r = CounterUniform(p_.seed, step) * total;
  for (size_t i = 0; i < keep; ++i) {
    r -= probs[i];
    if (r < 0) return cand_[i].second;
  }
  return cand_[keep - 1].second;
}

}  // namespace fak
