// The mixture-of-experts routing and combination (backends/cpu/moe.cpp) on hand-checked rows.
#include "backends/cpu/moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace fak::cpu {
namespace {

TEST(MoeRouting, PicksTheLargestWithTiesToTheLowerExpertAndRenormalizes) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  int32_t ids[3];
  float w[3];
  RouteRow(logits.data(), 5, 3, /*norm_top_k=*/false, ids, w);
  EXPECT_EQ(ids[0], 1);  // experts 1 and 3 tie: the lower first
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 2);
  const double z = std::exp(1.0 - 3) + 2 * std::exp(0.0) + std::exp(2.0 - 3) + std::exp(-1.0 - 3);
  EXPECT_NEAR(w[0], 1 / z, 1e-6);
  EXPECT_EQ(w[0], w[1]);
  EXPECT_NEAR(w[2], std::exp(-1.0) / z, 1e-6);

  logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  RouteRow(logits.data(), 5, 3, /*norm_top_k=*/true, ids, w);
  EXPECT_NEAR(w[0] + w[1] + w[2], 1.0, 1e-6);
  EXPECT_NEAR(w[2] / w[0], std::exp(-1.0), 1e-6);
}

// A row whose logits are not finite still gets k distinct experts (each expert's scratch holds one
// row per slot), and NaN weights for the finiteness check to report.
TEST(MoeRouting, NonFiniteLogitsStillPickDistinctExperts) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const std::vector<float>& row :
       {std::vector<float>{nan, nan, nan, nan}, std::vector<float>{inf, 0, inf, 1},
        std::vector<float>{0, nan, 1, 2}}) {
    std::vector<float> logits = row;
    int32_t ids[3];
    float w[3];
    RouteRow(logits.data(), 4, 3, true, ids, w);
    EXPECT_NE(ids[0], ids[1]);
    EXPECT_NE(ids[0], ids[2]);
    EXPECT_NE(ids[1], ids[2]);
    for (const int32_t id : ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, 4);
    }
    EXPECT_TRUE(std::isnan(w[0]) || std::isnan(w[1]) || std::isnan(w[2]));
  }
}

TEST(MoeRouting, GroupsSlotsByExpertInSlotOrder) {
  const std::vector<int32_t> ids = {2, 0, 2, 1, 0, 2};
  std::vector<int64_t> first, slots;
  GroupByExpert(ids, 4, &first, &slots);
  EXPECT_EQ(first, (std::vector<int64_t>{0, 2, 3, 6, 6}));  // expert 3: no slots
  EXPECT_EQ(slots, (std::vector<int64_t>{1, 4, 3, 0, 2, 5}));
}

TEST(MoeRouting, CombinesRanksInOrderThenTheSharedExpert) {
  const std::vector<float> y = {1, 2, 10, 20};  // two ranks of two
  const std::vector<float> w = {0.25f, 0.75f};
  const std::vector<float> shared = {100, 200};
  std::vector<float> out(2);
  CombineRow(y.data(), w.data(), 2, 2, nullptr, 0, out.data());
  EXPECT_EQ(out, (std::vector<float>{0.25f + 7.5f, 0.5f + 15.0f}));
  CombineRow(y.data(), w.data(), 2, 2, shared.data(), 0.5f, out.data());
  EXPECT_EQ(out, (std::vector<float>{7.75f + 50.0f, 15.5f + 100.0f}));
  const std::vector<float> x = {1, -2}, gw = {0.5f, 0.25f};  // x . gw = 0
  EXPECT_EQ(SharedExpertGate(x.data(), gw.data(), 2), 0.5f);
}

}  // namespace
}  // namespace fak::cpu
