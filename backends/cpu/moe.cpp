#include "backends/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fak::cpu {

void RouteRow(float* p, int64_t n_expert, int64_t k, bool norm_top_k, int32_t* ids, float* weights) {
  float top = p[0];
  for (int64_t e = 1; e < n_expert; ++e) top = std::max(top, p[e]);
  float sum = 0.0f;
  for (int64_t e = 0; e < n_expert; ++e) sum += p[e] = std::exp(p[e] - top);
  float kept = 0.0f;
  for (int64_t j = 0; j < k; ++j) {  // the k largest, ties to the lower expert
    int64_t best = -1;
    for (int64_t e = 0; e < n_expert; ++e) {
      if (p[e] >= 0.0f && (best < 0 || p[e] > p[best])) best = e;
    }
    const float w = best >= 0 ? p[best] / sum : std::numeric_limits<float>::quiet_NaN();
    // Non-finite logits: a NaN weight on an expert not taken yet, so the row still picks k distinct
    // experts (the caller's scratch holds one row per expert).
    for (int64_t e = 0; best < 0 && e < n_expert; ++e) {
      if (p[e] != -1.0f) best = e;
    }
    ids[j] = static_cast<int32_t>(best);
    weights[j] = w;
    kept += w;
    p[best] = -1.0f;  // taken
  }
  if (norm_top_k) {
    for (int64_t j = 0; j < k; ++j) weights[j] /= kept;
  }
}

void GroupByExpert(std::span<const int32_t> ids, int64_t n_expert, std::vector<int64_t>* first,
                   std::vector<int64_t>* slots) {
  first->assign(static_cast<size_t>(n_expert + 1), 0);
  for (const int32_t e : ids) ++(*first)[static_cast<size_t>(e) + 1];
  for (size_t e = 0; e < static_cast<size_t>(n_expert); ++e) (*first)[e + 1] += (*first)[e];
  slots->resize(ids.size());
  // first[e] is expert e's fill cursor and ends at e's end, where e + 1 begins; shifting by one then
  // restores the starts, so no second array is allocated per call.
  for (size_t i = 0; i < ids.size(); ++i) {
    (*slots)[static_cast<size_t>((*first)[static_cast<size_t>(ids[i])]++)] = static_cast<int64_t>(i);
  }
  for (size_t e = static_cast<size_t>(n_expert); e > 0; --e) (*first)[e] = (*first)[e - 1];
  (*first)[0] = 0;
}

void CombineRow(const float* y, const float* weights, int64_t k, int64_t d, const float* shared,
                float shared_scale, float* out) {
  for (int64_t c = 0; c < d; ++c) out[c] = weights[0] * y[c];
  for (int64_t j = 1; j < k; ++j) {
    const float* yj = y + j * d;
    for (int64_t c = 0; c < d; ++c) out[c] += weights[j] * yj[c];
  }
  if (shared == nullptr) return;
  for (int64_t c = 0; c < d; ++c) out[c] += shared_scale * shared[c];
}

float SharedExpertGate(const float* x, const float* w, int64_t d) {
  float dot = 0.0f;
  for (int64_t c = 0; c < d; ++c) dot += x[c] * w[c];
  return 1.0f / (1.0f + std::exp(-dot));
}

}  // namespace fak::cpu
