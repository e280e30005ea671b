#include "core/cpu_features.h"

#include <gtest/gtest.h>

namespace fak {
namespace {

TEST(CpuFeatures, ConsistentHierarchy) {
  const CpuFeatures& f = GetCpuFeatures();
  EXPECT_GE(f.logical_cores, 1);
  // Higher levels imply the lower ones they are built on.
  if (f.avx512vnni) {
    EXPECT_TRUE(f.avx512f);
  }
  if (f.avx512bw) {
    EXPECT_TRUE(f.avx512f);
  }
#if defined(__x86_64__)
  if (f.avx512f) {
    EXPECT_TRUE(f.avx2);
  }
  EXPECT_FALSE(f.neon);
#endif
#if defined(__aarch64__)
  EXPECT_TRUE(f.neon);
#endif
  EXPECT_FALSE(f.ToString().empty());
}

}  // namespace
}  // namespace fak
