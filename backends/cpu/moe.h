// The mixture-of-experts steps around the expert products (CpuBackend::MoeFfn runs the products):
// routing a row, grouping the rows by expert, and combining a row's expert results. Plain functions of
// their arguments, so a row's routing and sum do not depend on the rows around it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fak::cpu {

// Softmax over the n_expert router logits of one row (in place, as probabilities), then the k largest,
// ties to the lower expert: ids[j] and weights[j] for rank j, the weights renormalized to sum to 1 when
// norm_top_k. Logits that are not finite still give k distinct experts, with NaN weights (the pass's
// finiteness check reports them).
void RouteRow(float* logits, int64_t n_expert, int64_t k, bool norm_top_k, int32_t* ids, float* weights);

// The slots 0 .. ids.size() - 1 (row * k + rank) grouped by expert, each group in slot order: expert e's
// slots are slots[first[e] .. first[e + 1]). Every id is in [0, n_expert).
void GroupByExpert(std::span<const int32_t> ids, int64_t n_expert, std::vector<int64_t>* first,
                   std::vector<int64_t>* slots);

// out (d) = sum over ranks j in order of weights[j] * y[j] (y: k rows of d), then + shared_scale * shared
// when shared is not null.
void CombineRow(const float* y, const float* weights, int64_t k, int64_t d, const float* shared,
                float shared_scale, float* out);

// The shared expert's gate: sigmoid(x . w) over d elements.
float SharedExpertGate(const float* x, const float* w, int64_t d);

}  // namespace fak::cpu
