#include <gtest/gtest.h>
#include "ops/cpu_ops.h"
namespace fak { namespace {
TEST(Ops, Placeholder) { EXPECT_EQ(ops::HalfToFloat(0x3C00), 1.0f); }
} }
