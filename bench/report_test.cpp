#include "bench/report.h"

#include <gtest/gtest.h>

#include "bench/test_run_util.h"

namespace fak::bench {
namespace {

namespace fs = std::filesystem;

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(Report, BarChartHasOneBarPerArmAndKey) {
  const std::string svg =
      BarChartSvg("ttft", "ms", {"p50", "p95"}, {{"fak-cpu", {10, 12}}, {"a<b", {20, 30}}});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(Count(svg, "<rect x="), 4u + 2u);  // 4 bars + 2 legend swatches
  EXPECT_NE(svg.find("a&lt;b"), std::string::npos);
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
  EXPECT_NE(svg.find(">30.0<"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(Report, StackedBarSkipsEmptySegments) {
  const std::string svg = StackedBarSvg("d", "ms", {"setup", "prefill", "decode"}, {{"x", {0, 5, 15}}});
  EXPECT_EQ(Count(svg, "<title>"), 2u);
  EXPECT_NE(svg.find(">20.0<"), std::string::npos);  // the total
}

TEST(Report, WritesMarkdownAndChartsForARun) {
  const fs::path root = testing::TempRoot("report");
  auto out = RunCompare(testing::TinyOptions(root / "runs", {"fak:cpu", "fak:cpu"}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto files = WriteReport(out->run_dir);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(files->size(), 6u);  // report.md, four metric charts, the decomposition
  const std::string md = testing::ReadText(fs::path(out->run_dir) / "report.md");
  EXPECT_NE(md.find("| ttft_ms (ms, lower is better) |"), std::string::npos);
  EXPECT_NE(md.find("![chart-decode_tps.svg](chart-decode_tps.svg)"), std::string::npos);
  EXPECT_NE(md.find("| fak-cpu-2 | pass | 3 / 3 |"), std::string::npos) << md;
  for (const auto& f : *files) EXPECT_TRUE(fs::exists(fs::path(out->run_dir) / f)) << f;
  // A report of a folder whose packet does not validate is refused.
  testing::WriteText(fs::path(out->run_dir) / "manifest.json", "{}");
  auto bad = WriteReport(out->run_dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("manifest.json: SHA-256 mismatch"), std::string::npos);
  fs::remove_all(root);
}

}  // namespace
}  // namespace fak::bench
