#include "bench/report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "bench/packet.h"
#include "bench/validate.h"
#include "core/mapped_file.h"  // ReadFileToString

namespace fak::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kColors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                   "#76b7b2", "#edc948", "#b07aa1"};

std::string Esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string Num(double v) {
  if (v >= 1000) return fmt::format("{:.0f}", v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

Status WriteText(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f) return IoError("cannot write {}", p.string());
  return Status::Ok();
}

std::string Cell(const json& s) {
  if (s.is_null()) return "not measured";
  return fmt::format("{} / {}", Num(s["p50"].get<double>()), Num(s["p95"].get<double>()));
}

// The fleet scenario's own table: per arm the first agent's TTFT, the others' TTFT, their aggregate
// decode rate and the wall time, then the ratios against the reference arm.
std::string FleetSection(const json& fleet, const std::string& reference) {
  std::string md =
      fmt::format("## Fleet: {} ({} agents, {} preamble + {} task tokens, {} round(s))\n\n",
                  fleet.value("description", ""), fleet.value("agents", 0), fleet.value("preamble_tokens", 0),
                  fleet.value("task_tokens", 0), fleet.value("rounds", 0));
  md += "| arm |";
  for (const auto& m : kFleetMetrics) md += fmt::format(" {} ({}) p50 / p95 |", m.name, m.unit);
  md += " first / rest TTFT (p50) | fewest cached prompt tokens of a later agent |\n|---|";
  for (size_t i = 0; i < std::size(kFleetMetrics) + 2; ++i) md += "---:|";
  md += "\n";
  for (const auto& [name, a] : fleet["arms"].items()) {
    md += "| " + name + " |";
    if (a.is_null()) {
      md += " failed |\n";
      continue;
    }
    for (const auto& m : kFleetMetrics) md += " " + Cell(a[m.name]) + " |";
    const json& r = a["first_over_rest_p50"];
    md += fmt::format(" {} | {} |\n", r.is_null() ? "-" : Num(r.get<double>()) + "x",
                      a["rest_cached_tokens_min"].dump());
  }
  if (!fleet["ratios"].empty()) {
    md += fmt::format(
        "\nAgainst {}:\n\n| arm | metric | p50 ratio | p95 ratio | better |\n|---|---|---:|---:|---|\n",
        reference);
  }
  for (const auto& r : fleet["ratios"]) {
    md += fmt::format("| {} | {} | {:.3f} | {:.3f} | {} |\n", r.value("arm", ""), r.value("metric", ""),
                      r.value("p50_ratio", 0.0), r.value("p95_ratio", 0.0), r.value("better", ""));
  }
  return md + "\n";
}

}  // namespace

std::string BarChartSvg(const std::string& title, const std::string& unit,
                        const std::vector<std::string>& keys, const std::vector<BarSeries>& series) {
  const int bar = 28, gap = 36, left = 60, top = 40, plot_h = 200;
  const int group_w = static_cast<int>(keys.size()) * bar + gap;
  const int width = std::max(360, left + static_cast<int>(series.size()) * group_w + 20);
  const int height = top + plot_h + 70;
  double vmax = 0;
  for (const auto& s : series) {
    for (double v : s.values) vmax = std::max(vmax, v);
  }
  if (vmax <= 0) vmax = 1;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{} ({})</text>\n",
      width, height, width, height, left, Esc(title), Esc(unit));
  o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n", left, top + plot_h,
                   width - 10, top + plot_h);
  for (int t = 0; t <= 4; ++t) {
    const double v = vmax * t / 4;
    const int y = top + plot_h - static_cast<int>(plot_h * t / 4);
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#555\">{}</text>\n", left - 6, y + 4,
                     Num(v));
    o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#ddd\"/>\n", left, y, width - 10,
                     y);
  }
  for (size_t g = 0; g < series.size(); ++g) {
    const int gx = left + gap / 2 + static_cast<int>(g) * group_w;
    for (size_t k = 0; k < keys.size() && k < series[g].values.size(); ++k) {
      const double v = series[g].values[k];
      const int h = static_cast<int>(plot_h * v / vmax);
      const int x = gx + static_cast<int>(k) * bar;
      o += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{} {}: {}</title></rect>\n",
          x, top + plot_h - h, bar - 4, h, kColors[k % 7], Esc(series[g].label), Esc(keys[k]), Num(v));
      o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"9\">{}</text>\n",
                       x + (bar - 4) / 2, top + plot_h - h - 3, Num(v));
    }
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     gx + static_cast<int>(keys.size()) * bar / 2, top + plot_h + 16, Esc(series[g].label));
  }
  for (size_t k = 0; k < keys.size(); ++k) {
    const int x = left + static_cast<int>(k) * 70;
    o += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
        x, height - 22, kColors[k % 7], x + 14, height - 13, Esc(keys[k]));
  }
  return o + "</svg>\n";
}

std::string StackedBarSvg(const std::string& title, const std::string& unit,
                          const std::vector<std::string>& keys, const std::vector<BarSeries>& series) {
  const int left = 130, top = 40, row = 30, plot_w = 460;
  const int width = left + plot_w + 30;
  const int height = top + static_cast<int>(series.size()) * row + 50;
  double vmax = 0;
  for (const auto& s : series) {
    double sum = 0;
    for (double v : s.values) sum += v;
    vmax = std::max(vmax, sum);
  }
  if (vmax <= 0) vmax = 1;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{} ({})</text>\n",
      width, height, width, height, Esc(title), Esc(unit));
  for (size_t s = 0; s < series.size(); ++s) {
    const int y = top + static_cast<int>(s) * row;
    double x = left, sum = 0;
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 6, y + 15,
                     Esc(series[s].label));
    for (size_t k = 0; k < keys.size() && k < series[s].values.size(); ++k) {
      const double w = plot_w * series[s].values[k] / vmax;
      sum += series[s].values[k];
      if (w > 0) {
        o += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"20\" fill=\"{}\"><title>{} {}: {} "
            "{}</title></rect>\n",
            x, y, w, kColors[k % 7], Esc(series[s].label), Esc(keys[k]), Num(series[s].values[k]), Esc(unit));
      }
      x += w;
    }
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"9\">{}</text>\n",
                     std::min(x + 4, double(width - 40)), y + 14, Num(sum));
  }
  for (size_t k = 0; k < keys.size(); ++k) {
    const int x = 10 + static_cast<int>(k) * 85;
    o += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
        x, height - 22, kColors[k % 7], x + 14, height - 13, Esc(keys[k]));
  }
  return o + "</svg>\n";
}

Result<std::vector<std::string>> WriteReport(const std::string& run_dir) {
  const fs::path dir(run_dir);
  FAK_ASSIGN_OR_RETURN(std::string text, ReadFileToString((dir / "packet.json").string()));
  const json p = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (p.is_discarded() || !p.is_object() || p.value("schema", "") != kPacketSchema) {
    return Corrupt("{}: not a {} packet", (dir / "packet.json").string(), kPacketSchema);
  }
  const ValidationReport v = ValidatePacket((dir / "packet.json").string());
  if (!v.valid) {
    return Corrupt("{}: the packet does not validate ({} violations; first: {}); run `fak bench validate`",
                   (dir / "packet.json").string(), v.violations.size(), v.violations.front());
  }
  std::vector<std::string> written;
  const auto& arms = p["arms"];
  for (const auto& m : kMetrics) {
    std::vector<BarSeries> series;
    for (const auto& a : arms) {
      if (a["status"] != "ok" || a["metrics"][m.name].is_null()) continue;
      series.push_back(
          {a["name"],
           {a["metrics"][m.name]["p50"].get<double>(), a["metrics"][m.name]["p95"].get<double>()}});
    }
    if (series.empty()) continue;
    const std::string f = fmt::format("chart-{}.svg", m.name);
    FAK_RETURN_IF_ERROR(WriteText(dir / f, BarChartSvg(m.name, m.unit, {"p50", "p95"}, series)));
    written.push_back(f);
  }
  const json fleet = p.value("fleet", json());
  if (!fleet.is_null()) {
    for (const auto& m : kFleetMetrics) {
      std::vector<BarSeries> series;
      for (const auto& [name, a] : fleet["arms"].items()) {
        if (a.is_null() || a[m.name].is_null()) continue;
        series.push_back({name, {a[m.name]["p50"].get<double>(), a[m.name]["p95"].get<double>()}});
      }
      if (series.empty()) continue;
      const std::string f = fmt::format("chart-fleet-{}.svg", m.name);
      FAK_RETURN_IF_ERROR(WriteText(dir / f, BarChartSvg(m.name, m.unit, {"p50", "p95"}, series)));
      written.push_back(f);
    }
  }
  std::vector<BarSeries> decomp;
  for (const auto& a : arms) {
    if (a["status"] != "ok" || a["decomposition"].is_null()) continue;
    BarSeries s{a["name"], {}};
    for (const auto& part : DecompositionParts())
      s.values.push_back(a["decomposition"]["mean_ms"][part].get<double>());
    decomp.push_back(std::move(s));
  }
  if (!decomp.empty()) {
    FAK_RETURN_IF_ERROR(
        WriteText(dir / "chart-decomposition.svg",
                  StackedBarSvg("mean request decomposition", "ms", DecompositionParts(), decomp)));
    written.push_back("chart-decomposition.svg");
  }

  const auto& hw = p["hardware"];
  std::string md = fmt::format("# Comparison: {}\n\n", p["run"].value("name", ""));
  md += fmt::format("Run {} on `{}`. Packet SHA-256 `{}`: valid (`fak bench validate`).\n\n",
                    p["run"].value("created_utc", ""), hw.value("host", ""), v.packet_sha256);
  md += "## Machine and workload\n\n| | |\n|---|---|\n";
  md += fmt::format("| CPU | {} ({} logical, {} physical cores) |\n", hw["cpu"].value("model", ""),
                    hw["cpu"].value("logical_cores", 0), hw["cpu"].value("physical_cores", 0));
  md += fmt::format("| memory | {:.1f} GiB |\n", hw.value("memory_bytes", uint64_t{0}) / double(1ull << 30));
  std::string gpus;
  for (const auto& g : hw["gpu"]["devices"]) gpus += (gpus.empty() ? "" : ", ") + g.value("name", "");
  md += fmt::format("| GPU | {} |\n", gpus.empty() ? hw["gpu"].value("note", "none") : gpus);
  md += fmt::format("| OS | {} ({}) |\n| compiler | {} |\n", hw["os"].value("name", ""),
                    hw["os"].value("kernel", ""), hw.value("compiler", ""));
  md += fmt::format("| model | `{}` ({}, {:.2f} GiB), SHA-256 `{}` |\n", p["model"].value("file", ""),
                    p["model"].value("weight_type", ""),
                    p["model"].value("size_bytes", uint64_t{0}) / double(1ull << 30),
                    p["model"].value("sha256", ""));
  const auto& wl = p["workload"];
  md += fmt::format(
      "| workload | {} prompts ({} {}), {} prompt + {} generated tokens, greedy, {} threads, 1 warm-up "
      "excluded |\n\n",
      wl.value("prompts", 0), wl["prompt_set"].value("file", ""), wl["prompt_set"].value("version", ""),
      wl.value("ctx", 0), wl.value("gen", 0), wl.value("threads", 0));
  md += "## Arms\n\n| arm | engine | version | status | quality |\n|---|---|---|---|---|\n";
  for (const auto& a : arms) {
    md += fmt::format("| {} | {} | {} | {} | {} |\n", a.value("name", ""), a.value("engine", ""),
                      a.value("version", ""), a.value("status", ""), a["quality"].value("verdict", ""));
  }
  if (!fleet.is_null()) md += FleetSection(fleet, p.value("reference_arm", ""));
  md += "\n## Latency and throughput (p50 / p95)\n\n| metric |";
  for (const auto& a : arms) md += fmt::format(" {} |", a.value("name", ""));
  md += "\n|---|";
  for (size_t i = 0; i < arms.size(); ++i) md += "---:|";
  md += "\n";
  for (const auto& m : kMetrics) {
    md += fmt::format("| {} ({}, {} is better) |", m.name, m.unit, m.higher_is_better ? "higher" : "lower");
    for (const auto& a : arms)
      md += " " + (a["status"] == "ok" ? Cell(a["metrics"][m.name]) : std::string("failed")) + " |";
    md += "\n";
  }
  md += fmt::format("\n## Ratios against {}\n\n", p.value("reference_arm", ""));
  if (p["ratios"].empty())
    md += "No other arm measured a metric the reference measured.\n";
  else
    md += "| arm | metric | p50 ratio | p95 ratio | better |\n|---|---|---:|---:|---|\n";
  for (const auto& r : p["ratios"]) {
    md += fmt::format("| {} | {} | {:.3f} | {:.3f} | {} |\n", r.value("arm", ""), r.value("metric", ""),
                      r.value("p50_ratio", 0.0), r.value("p95_ratio", 0.0), r.value("better", ""));
  }
  md += "\n## Request decomposition (mean ms per request)\n\n| arm |";
  for (const auto& part : DecompositionParts()) md += " " + part + " |";
  md += " total | source |\n|---|";
  for (size_t i = 0; i <= DecompositionParts().size(); ++i) md += "---:|";
  md += "---|\n";
  for (const auto& a : arms) {
    if (a["status"] != "ok" || a["decomposition"].is_null()) continue;
    md += "| " + a.value("name", "") + " |";
    for (const auto& part : DecompositionParts())
      md += " " + Num(a["decomposition"]["mean_ms"][part].get<double>()) + " |";
    md += fmt::format(" {} | {} |\n", Num(a["decomposition"]["mean_ms"]["total"].get<double>()),
                      a["decomposition"].value("source", ""));
  }
  md += fmt::format(
      "\n## Quality ({} v{}, cosine >= {})\n\n| arm | verdict | token matches | min cosine "
      "|\n|---|---|---:|---:|\n",
      p["quality_policy"].value("name", ""), p["quality_policy"].value("version", 0),
      p["quality_policy"].value("cosine_min", 0.0));
  for (const auto& a : arms) {
    const auto& q = a["quality"];
    md += fmt::format("| {} | {} | {} | {} |\n", a.value("name", ""), q.value("verdict", ""),
                      q["token_matches"].is_null()
                          ? "-"
                          : fmt::format("{} / {}", q["token_matches"].dump(), q["prompts"].dump()),
                      q["min_cosine"].is_null() ? "-" : fmt::format("{:.6f}", q["min_cosine"].get<double>()));
  }
  bool any_failed = false;
  for (const auto& a : arms) {
    if (a["status"] == "ok") continue;
    if (!any_failed) md += "\n## Failed arms\n";
    any_failed = true;
    md += fmt::format("\n### {}\n\n{}\n\n```\n{}\n```\n", a.value("name", ""), a.value("reason", ""),
                      a.value("stderr_tail", ""));
  }
  if (!written.empty()) md += "\n## Charts\n\n";
  for (const auto& f : written) md += fmt::format("![{}]({})\n\n", f, f);
  FAK_RETURN_IF_ERROR(WriteText(dir / "report.md", md));
  written.insert(written.begin(), "report.md");
  return written;
}

}  // namespace fak::bench
