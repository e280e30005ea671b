#include "bench/hardware.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace fak::bench {
namespace {

TEST(Hardware, CatalogDescribesThisMachine) {
  const nlohmann::json h = CollectHardware();
  std::printf("%s\n", h.dump(1).c_str());
  EXPECT_FALSE(h["host"].get<std::string>().empty());
  EXPECT_EQ(h["host"], HostName());
  EXPECT_FALSE(h["cpu"]["model"].get<std::string>().empty());
  EXPECT_GE(h["cpu"]["logical_cores"].get<int>(), 1);
  EXPECT_GT(h["memory_bytes"].get<uint64_t>(), 1ull << 28);
  EXPECT_FALSE(h["os"]["kernel"].get<std::string>().empty());
  // The compiler that built this test, whatever its version.
  EXPECT_NE(h["compiler"].get<std::string>().find(__VERSION__), std::string::npos);
  EXPECT_FALSE(h["libraries"]["openssl"].get<std::string>().empty());
  EXPECT_TRUE(h["gpu"]["devices"].is_array());
#if defined(FAK_HAVE_CUDA)
  for (const auto& d : h["gpu"]["devices"]) {
    EXPECT_FALSE(d["name"].get<std::string>().empty());
    EXPECT_GT(d["memory_bytes"].get<uint64_t>(), 0u);
  }
  if (h["gpu"]["devices"].empty()) std::printf("skipped: no GPU visible\n");
#endif
  EXPECT_EQ(LoadAverage().find(' ') != std::string::npos, true);
}

}  // namespace
}  // namespace fak::bench
