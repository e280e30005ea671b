#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
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
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return InvalidArgument("logit bias for token {}: ids are >= 0", id);
    if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity()) {
      return InvalidArgument("logit bias {} for token {}: want a finite number or -infinity", bias, id);
    }
  }
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
  // Two passes the compiler turns into vector code: the largest value, then where it first occurs. One
  // pass that tracks the index compares each value with a reloaded best and branches on it: 0.5 ms for a
  // 152k vocabulary, paid by every greedy request every token. NaNs are skipped as one pass would skip
  // them (no comparison with a NaN is true); a NaN first value wins, as it would there.
  const size_t n = logits.size();
  if (n == 0) return 0;
  constexpr size_t kLanes = 16;
  float lane[kLanes];
  for (float& l : lane) l = logits[0];
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) lane[l] = logits[i + l] > lane[l] ? logits[i + l] : lane[l];
  }
  float best = lane[0];
  for (size_t l = 1; l < kLanes; ++l) best = lane[l] > best ? lane[l] : best;
  for (; i < n; ++i) best = logits[i] > best ? logits[i] : best;
  for (size_t j = 0; j < n; ++j) {
    if (logits[j] == best) return static_cast<int32_t>(j);
  }
  return 0;  // best is a NaN: only when the first value is one
}

int32_t Sampler::Sample(std::span<float> logits, std::span<const int32_t> history, uint64_t step) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  for (const auto& [id, bias] : p_.logit_bias) {
    if (id >= 0 && id < vocab) logits[static_cast<size_t>(id)] += bias;
  }
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

  // Tokens at -infinity (refused by a grammar) can never be drawn: they are not candidates.
  cand_.clear();
  cand_.reserve(logits.size());
  for (int32_t i = 0; i < vocab; ++i) {
    const float l = logits[static_cast<size_t>(i)];
    if (l > -std::numeric_limits<float>::infinity()) cand_.emplace_back(l / p_.temperature, i);
  }
  if (cand_.empty()) return Argmax(logits);
  const double u = CounterUniform(p_.seed, step);
  if ((p_.top_k == 0 || static_cast<size_t>(p_.top_k) >= cand_.size()) && p_.top_p >= 1.0f && p_.min_p <= 0) {
    // Nothing to cut: a draw from the softmax over the candidates in id order, no sort.
    float max_l = cand_[0].first;
    for (const auto& c : cand_) max_l = std::max(max_l, c.first);
    double sum = 0;
    for (const auto& c : cand_) sum += std::exp(static_cast<double>(c.first - max_l));
    double r = u * sum;
    for (const auto& c : cand_) {
      r -= std::exp(static_cast<double>(c.first - max_l));
      if (r < 0) return c.second;
    }
    return cand_.back().second;
  }
  // Sorted by logit, ties by id, so the order (and the draw) is deterministic. Sorting a 152k
  // vocabulary costs more than a small model's step, so only a prefix is sorted, grown until it
  // holds everything top-k, top-p and min-p keep.
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t k = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < k) {
    k = static_cast<size_t>(p_.top_k);
    std::partial_sort(cand_.begin(), cand_.begin() + static_cast<long>(k), cand_.end(), by_logit);
    cand_.resize(k);
  }
  size_t sorted = std::min(k, size_t{256});
  std::partial_sort(cand_.begin(), cand_.begin() + static_cast<long>(sorted), cand_.end(), by_logit);
  const float max_l = cand_[0].first;
  double total = 0;  // the softmax's denominator over the top-k candidates
  for (const auto& c : cand_) total += std::exp(static_cast<double>(c.first - max_l));
  probs_.clear();
  size_t keep = 0;
  double cum = 0;
  bool decided = false;
  while (!decided) {
    for (size_t i = probs_.size(); i < sorted; ++i) {
      const double p = std::exp(static_cast<double>(cand_[i].first - max_l)) / total;
      if (p_.min_p > 0 && i > 0 && p < p_.min_p * probs_[0]) {
        decided = true;
        break;
      }
      probs_.push_back(p);
      cum += p;
      keep = i + 1;
      if (p_.top_p < 1.0f && cum >= p_.top_p) {
        decided = true;
        break;
      }
    }
    if (decided || sorted == k) break;
    const size_t next = std::min(k, sorted * 8);
    std::partial_sort(cand_.begin() + static_cast<long>(sorted), cand_.begin() + static_cast<long>(next),
                      cand_.end(), by_logit);
    sorted = next;
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += probs_[i];
  double r = u * kept;
  for (size_t i = 0; i < keep; ++i) {
    r -= probs_[i];
    if (r < 0) return cand_[i].second;
  }
  return cand_[keep - 1].second;
}

}  // namespace fak
