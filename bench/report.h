// fak bench report: report.md (tables) and hand-written SVG charts (p50/p95 bars per arm and
// metric, and the mean request decomposition) written into a run folder from its packet.json.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace fak::bench {

struct BarSeries {
  std::string label;           // an arm
  std::vector<double> values;  // one per key (p50, p95) or per part
};

// A grouped bar chart: one group per series, one bar per key.
std::string BarChartSvg(const std::string& title, const std::string& unit,
                        const std::vector<std::string>& keys, const std::vector<BarSeries>& series);
// Horizontal stacked bars: one per series, one segment per key.
std::string StackedBarSvg(const std::string& title, const std::string& unit,
                          const std::vector<std::string>& keys, const std::vector<BarSeries>& series);

// Writes report.md and chart-*.svg into run_dir; returns the files written.
Result<std::vector<std::string>> WriteReport(const std::string& run_dir);

}  // namespace fak::bench
