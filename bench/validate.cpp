#include "bench/validate.h"

#include <cmath>
#include <filesystem>
#include <map>

#include "bench/packet.h"
#include "bench/quality.h"
#include "bench/stats.h"
#include "core/mapped_file.h"  // ReadFileToString
#include "core/sha256.h"

namespace fak::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class Checker {
 public:
  explicit Checker(std::vector<std::string>* v) : v_(v) {}

  template <typename... Args>
  void Add(fmt::format_string<Args...> f, Args&&... args) {
    v_->push_back(fmt::format(f, std::forward<Args>(args)...));
  }

  // Field `key` of object `j` exists and has the type `pred` accepts; else a violation "where: ...".
  bool Has(const json& j, const std::string& where, const char* key, bool (json::*pred)() const noexcept,
           const char* type) {
    if (!j.is_object() || !j.contains(key)) {
      Add("{}: field \"{}\" is missing", where, key);
      return false;
    }
    if (!(j[key].*pred)()) {
      Add("{}: field \"{}\" must be {}", where, key, type);
      return false;
    }
    return true;
  }

 private:
  std::vector<std::string>* v_;
};

bool IsHex64(const json& j) {
  if (!j.is_string()) return false;
  const auto s = j.get<std::string>();
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

void CheckSummary(Checker& c, const std::string& where, const json& s) {
  for (const char* k : {"n", "p50", "p95", "mean", "min", "max"}) {
    if (!c.Has(s, where, k, &json::is_number, "a number")) return;
  }
  const double p50 = s["p50"], p95 = s["p95"], mn = s["min"], mx = s["max"];
  if (p50 > p95) c.Add("{}: p50 {} is greater than p95 {}", where, p50, p95);
  if (mn > p50 || p95 > mx) c.Add("{}: min <= p50 <= p95 <= max does not hold", where);
  if (s["n"].get<int64_t>() < 1) c.Add("{}: n must be at least 1", where);
}

void CompareSummaries(Checker& c, const std::string& where, const json& stated, const json& derived,
                      const std::string& raw_name) {
  if (stated.is_null() != derived.is_null()) {
    c.Add("{}: is {} but {} gives {}", where, stated.is_null() ? "null" : "present", raw_name,
          derived.is_null() ? "no samples" : "samples");
    return;
  }
  if (stated.is_null() || !stated.is_object()) return;
  for (const char* k : {"n", "p50", "p95", "mean", "min", "max"}) {
    if (!stated.contains(k) || !stated[k].is_number()) continue;  // reported by CheckSummary
    if (!NearlyEqual(stated[k].get<double>(), derived[k].get<double>())) {
      c.Add("{}.{} is {} but the samples in {} give {}", where, k, stated[k].dump(), raw_name,
            derived[k].dump());
    }
  }
}

// Parts of one decomposition add up to its total; none is negative.
void CheckSum(Checker& c, const std::string& where, const json& parts, double total) {
  double sum = 0;
  for (const auto& p : DecompositionParts()) {
    if (!parts.contains(p) || !parts[p].is_number()) {
      c.Add("{}: part \"{}\" is missing", where, p);
      return;
    }
    const double x = parts[p].get<double>();
    if (x < -1e-9) c.Add("{}: part \"{}\" is negative ({})", where, p, x);
    sum += x;
  }
  if (std::fabs(sum - total) > 1e-6 * std::max(1.0, std::fabs(total))) {
    c.Add("{}: parts sum to {:.6f} ms but total is {:.6f} ms", where, sum, total);
  }
}

// Structure, sample counts and per-request sums of one raw file. Returns false when it cannot be
// used for recomputation.
bool CheckRaw(Checker& c, const std::string& fname, const json& raw, const json& arm, const json& workload) {
  if (!raw.is_object() || raw.value("schema", "") != kRawSchema) {
    c.Add("{}: schema is not {}", fname, kRawSchema);
    return false;
  }
  bool ok = c.Has(raw, fname, "requests", &json::is_array, "an array");
  ok = c.Has(raw, fname, "repetitions", &json::is_array, "an array") && ok;
  ok = c.Has(raw, fname, "measures", &json::is_object, "an object") && ok;
  if (!ok) return false;
  if (raw.value("arm", "") != arm.value("name", ""))
    c.Add("{}: arm is \"{}\", packet says \"{}\"", fname, raw.value("arm", ""), arm.value("name", ""));
  const int64_t prompts = workload.value("prompts", int64_t{0}), gen = workload.value("gen", int64_t{0});
  const bool latency = raw["measures"].value("latency", false);
  const auto& reqs = raw["requests"];
  const auto& reps = raw["repetitions"];
  const int64_t n = static_cast<int64_t>(!reqs.empty() ? reqs.size() : reps.size());
  if (n != prompts)
    c.Add("{}: {} samples (requests or repetitions), the workload has {} prompts", fname, n, prompts);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& r = reqs[i];
    const std::string where = fmt::format("{}: request {}", fname, i);
    bool good = c.Has(r, where, "itl_ms", &json::is_array, "an array");
    good = c.Has(r, where, "prefill_tps", &json::is_number, "a number") && good;
    good = c.Has(r, where, "decode_tps", &json::is_number, "a number") && good;
    good = c.Has(r, where, "decomposition_ms", &json::is_object, "an object") && good;
    if (latency) good = c.Has(r, where, "ttft_ms", &json::is_number, "a number") && good;
    if (!good) {
      ok = false;
      continue;
    }
    if (r.value("prompt_index", int64_t{-1}) != static_cast<int64_t>(i)) {
      c.Add("{}: prompt_index is {}, expected {}", where, r.value("prompt_index", int64_t{-1}), i);
    }
    const int64_t recoveries = r.value("recoveries", int64_t{0});
    if (latency && static_cast<int64_t>(r["itl_ms"].size()) != gen - 1 - recoveries) {
      c.Add("{}: {} inter-token samples, expected gen - 1{} = {}", where, r["itl_ms"].size(),
            recoveries > 0 ? fmt::format(" - {} recoveries", recoveries) : "", gen - 1 - recoveries);
    }
    for (const auto& x : r["itl_ms"]) {
      if (!x.is_number()) {
        c.Add("{}: itl_ms holds a non-number", where);
        ok = false;
        break;
      }
    }
    if (r.value("tokens_generated", int64_t{-1}) != gen) {
      c.Add("{}: tokens_generated is {}, expected gen = {}", where, r.value("tokens_generated", int64_t{-1}),
            gen);
    }
    const auto& d = r["decomposition_ms"];
    if (!d.contains("total") || !d["total"].is_number()) {
      c.Add("{}: decomposition_ms.total is missing", where);
      ok = false;
      continue;
    }
    CheckSum(c, where + ": decomposition_ms", d, d["total"].get<double>());
    if (!d.contains("other")) ok = false;
  }
  for (size_t i = 0; i < reps.size(); ++i) {
    for (const char* k : {"prefill_ms", "decode_ms", "prefill_tps", "decode_tps"}) {
      if (!c.Has(reps[i], fmt::format("{}: repetition {}", fname, i), k, &json::is_number, "a number"))
        ok = false;
    }
  }
  return ok;
}

void CheckQuality(Checker& c, const std::string& fname, const json& q, const json& arm,
                  const std::string& ref) {
  if (!q.is_object() || q.value("schema", "") != "fak.bench.quality.v1") {
    c.Add("{}: schema is not fak.bench.quality.v1", fname);
    return;
  }
  if (!c.Has(q, fname, "prompts", &json::is_array, "an array") ||
      !c.Has(q, fname, "summary", &json::is_object, "an object") ||
      !c.Has(q, fname, "policy", &json::is_object, "an object")) {
    return;
  }
  if (q["policy"].value("name", "") != kQualityPolicy ||
      q["policy"].value("version", 0) != kQualityPolicyVersion) {
    c.Add("{}: policy is not {} v{}", fname, kQualityPolicy, kQualityPolicyVersion);
  }
  if (q.value("reference_arm", "") != ref)
    c.Add("{}: reference_arm is \"{}\", packet says \"{}\"", fname, q.value("reference_arm", ""), ref);
  const std::string stated = q.value("verdict", "");
  const std::string packet_verdict = arm.contains("quality") ? arm["quality"].value("verdict", "") : "";
  if (stated != packet_verdict)
    c.Add("{}: verdict \"{}\" but the packet says \"{}\"", fname, stated, packet_verdict);
  for (size_t i = 0; i < q["prompts"].size(); ++i) {
    const auto& e = q["prompts"][i];
    if (!e.contains("reference_tokens") || !e.contains("tokens_match")) continue;
    const bool match = e["tokens"] == e["reference_tokens"];
    if (e["tokens_match"] != match)
      c.Add("{}: prompt {}: tokens_match is {} but the token lists {}", fname, i, e["tokens_match"].dump(),
            match ? "agree" : "differ");
    if (e.contains("cosine") && e.contains("cosine_pass") &&
        e["cosine_pass"].get<bool>() !=
            (e["cosine"].get<double>() >= q["policy"].value("cosine_min", kCosineMin))) {
      c.Add("{}: prompt {}: cosine_pass disagrees with cosine {}", fname, i, e["cosine"].dump());
    }
  }
  const std::string implied = VerdictFromEvidence(q);
  if (implied != stated) c.Add("{}: verdict \"{}\" but its evidence implies \"{}\"", fname, stated, implied);
  if (arm.value("status", "") != "ok" && stated != "arm-failed")
    c.Add("{}: a failed arm's verdict must be arm-failed", fname);
}

// The "fleet" section of a fleet packet: every ok arm's summary recomputed from its raw file, and
// the ratios from the summaries.
void CheckFleet(Checker& c, const json& f, const std::map<std::string, std::pair<std::string, json>>& raws,
                const std::string& ref) {
  if (!c.Has(f, "fleet", "arms", &json::is_object, "an object") ||
      !c.Has(f, "fleet", "ratios", &json::is_array, "an array")) {
    return;
  }
  for (const char* k : {"scenario", "agents", "preamble_tokens", "task_tokens"}) {
    if (!f.contains(k)) c.Add("fleet: field \"{}\" is missing", k);
  }
  json derived = json::object();
  for (const auto& [name, entry] : raws) {
    const auto& [raw_name, raw] = entry;
    const json d = FleetFromRaw(raw);
    derived[name] = d;
    const std::string where = "fleet.arms." + name;
    if (!f["arms"].contains(name)) {
      c.Add("{}: missing", where);
      continue;
    }
    const json& st = f["arms"][name];
    if (d.is_null() || st.is_null()) {
      if (d.is_null() != st.is_null())
        c.Add("{}: is {} but {} {}", where, st.is_null() ? "null" : "present", raw_name,
              d.is_null() ? "holds no fleet requests" : "holds fleet requests");
      continue;
    }
    for (const auto& m : kFleetMetrics) {
      if (!st.contains(m.name)) {
        c.Add("{}.{}: missing", where, m.name);
        continue;
      }
      if (!st[m.name].is_null()) CheckSummary(c, where + "." + m.name, st[m.name]);
      CompareSummaries(c, where + "." + m.name, st[m.name], d[m.name], raw_name);
    }
    for (const char* k :
         {"rounds", "agents", "rest_cached_tokens_min", "first_over_rest_p50", "first_over_rest_p95"}) {
      const json x = st.value(k, json()), y = d[k];
      const bool same = (x.is_null() && y.is_null()) ||
                        (x.is_number() && y.is_number() && NearlyEqual(x.get<double>(), y.get<double>()));
      if (!same) c.Add("{}.{} is {} but the samples in {} give {}", where, k, x.dump(), raw_name, y.dump());
    }
  }
  const json ratios = FleetRatios(derived, ref);
  const json& stated = f["ratios"];
  if (ratios.size() != stated.size()) {
    c.Add("fleet.ratios: {} entries, the arms' fleet summaries give {}", stated.size(), ratios.size());
    return;
  }
  for (size_t i = 0; i < ratios.size(); ++i) {
    for (const char* k : {"p50_ratio", "p95_ratio"}) {
      const json& s = stated[i];
      if (!s.contains(k) || !s[k].is_number() || s.value("metric", "") != ratios[i]["metric"] ||
          !NearlyEqual(s[k].get<double>(), ratios[i][k].get<double>())) {
        c.Add("fleet.ratios[{}] ({} {}): {} does not follow from the summaries", i,
              ratios[i]["arm"].get<std::string>(), ratios[i]["metric"].get<std::string>(), k);
      }
    }
  }
}

}  // namespace

nlohmann::ordered_json ValidationReport::ToJson() const {
  nlohmann::ordered_json j = {
      {"schema", kValidationSchema}, {"valid", valid}, {"packet_sha256", packet_sha256}};
  if (!violations.empty()) j["violations"] = violations;
  return j;
}

namespace {

void ValidateInto(const std::string& packet_path, ValidationReport& rep) {
  Checker c(&rep.violations);
  const fs::path dir = fs::path(packet_path).parent_path();
  const std::string pname = fs::path(packet_path).filename().string();
  auto text = ReadFileToString(packet_path);
  if (!text.ok()) {
    c.Add("{}: {}", pname, text.status().ToString());
    return;
  }
  rep.packet_sha256 = Sha256Hex({reinterpret_cast<const uint8_t*>(text->data()), text->size()});
  json p = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (p.is_discarded() || !p.is_object()) {
    c.Add("{}: not a JSON object", pname);
    return;
  }
  // Schema.
  if (p.value("schema", "") != kPacketSchema)
    c.Add("{}: schema is \"{}\", expected {}", pname, p.value("schema", ""), kPacketSchema);
  bool ok = c.Has(p, pname, "run", &json::is_object, "an object");
  ok = c.Has(p, pname, "hardware", &json::is_object, "an object") && ok;
  ok = c.Has(p, pname, "model", &json::is_object, "an object") && ok;
  ok = c.Has(p, pname, "workload", &json::is_object, "an object") && ok;
  ok = c.Has(p, pname, "quality_policy", &json::is_object, "an object") && ok;
  ok = c.Has(p, pname, "reference_arm", &json::is_string, "a string") && ok;
  ok = c.Has(p, pname, "arms", &json::is_array, "an array") && ok;
  ok = c.Has(p, pname, "ratios", &json::is_array, "an array") && ok;
  ok = c.Has(p, pname, "files", &json::is_object, "an object") && ok;
  if (!ok) return;
  const auto& hw = p["hardware"];
  c.Has(hw, "hardware", "host", &json::is_string, "a string");
  if (c.Has(hw, "hardware", "cpu", &json::is_object, "an object"))
    c.Has(hw["cpu"], "hardware.cpu", "model", &json::is_string, "a string");
  c.Has(hw, "hardware", "memory_bytes", &json::is_number_unsigned, "a non-negative integer");
  c.Has(hw, "hardware", "gpu", &json::is_object, "an object");
  c.Has(hw, "hardware", "os", &json::is_object, "an object");
  c.Has(hw, "hardware", "compiler", &json::is_string, "a string");
  c.Has(p["model"], "model", "file", &json::is_string, "a string");
  if (!IsHex64(p["model"].value("sha256", json()))) c.Add("model: sha256 must be 64 lowercase hex digits");
  c.Has(p["model"], "model", "size_bytes", &json::is_number_unsigned, "a non-negative integer");
  const auto& wl = p["workload"];
  for (const char* k : {"prompts", "ctx", "gen"}) {
    if (c.Has(wl, "workload", k, &json::is_number_integer, "an integer") && wl[k].get<int64_t>() < 1) {
      c.Add("workload: {} must be at least 1", k);
    }
  }
  if (p["quality_policy"].value("name", "") != kQualityPolicy)
    c.Add("quality_policy: name must be {}", kQualityPolicy);

  // Digests of every referenced file.
  for (const auto& [name, sha] : p["files"].items()) {
    if (name.empty() || name.find('/') != std::string::npos || name.find("..") != std::string::npos) {
      c.Add("files: \"{}\" is not a plain file name in the run folder", name);
      continue;
    }
    auto digest = Sha256File((dir / name).string());
    if (!digest.ok()) {
      c.Add("{}: referenced by the packet but cannot be read ({})", name, digest.status().message());
    } else if (!sha.is_string() || *digest != sha.get<std::string>()) {
      c.Add("{}: SHA-256 mismatch: the packet says {}, the file has {}", name,
            sha.is_string() ? sha.get<std::string>() : sha.dump(), *digest);
    }
  }
  if (!p["files"].contains("manifest.json")) c.Add("files: manifest.json is not referenced");

  // Arms.
  const std::string ref = p["reference_arm"];
  bool ref_found = false;
  std::map<std::string, std::pair<std::string, json>> raws;  // arm name -> (raw file, raw doc) of ok arms
  for (size_t i = 0; i < p["arms"].size(); ++i) {
    const auto& a = p["arms"][i];
    const std::string an = a.is_object() ? a.value("name", fmt::format("#{}", i)) : fmt::format("#{}", i);
    const std::string where = "arm " + an;
    ref_found |= an == ref;
    bool good = c.Has(a, where, "name", &json::is_string, "a string");
    good = c.Has(a, where, "status", &json::is_string, "a string") && good;
    good = c.Has(a, where, "quality", &json::is_object, "an object") && good;
    good = c.Has(a, where, "files", &json::is_object, "an object") && good;
    if (!good) continue;
    const std::string status = a["status"];
    if (status != "ok" && status != "failed")
      c.Add("{}: status \"{}\" is neither ok nor failed", where, status);
    if (status == "failed" && a.value("reason", "").empty()) c.Add("{}: failed without a reason", where);
    const std::string raw_name = a["files"].value("raw", ""), q_name = a["files"].value("quality", "");
    for (const auto& f : {raw_name, q_name}) {
      if (f.empty() || !p["files"].contains(f)) c.Add("{}: file \"{}\" is not listed in files", where, f);
    }
    if (raw_name.empty() || q_name.empty() || !p["files"].contains(raw_name) || !p["files"].contains(q_name))
      continue;
    auto raw_text = ReadFileToString((dir / raw_name).string());
    auto q_text = ReadFileToString((dir / q_name).string());
    if (!raw_text.ok() || !q_text.ok()) continue;  // reported with the digests
    const json raw = json::parse(*raw_text, nullptr, false);
    const json q = json::parse(*q_text, nullptr, false);
    if (raw.is_discarded()) c.Add("{}: not JSON", raw_name);
    if (q.is_discarded()) c.Add("{}: not JSON", q_name);
    if (!q.is_discarded()) CheckQuality(c, q_name, q, a, ref);
    if (raw.is_discarded() || status != "ok") continue;
    if (!c.Has(a, where, "metrics", &json::is_object, "an object") ||
        !c.Has(a, where, "decomposition", &json::is_object, "an object")) {
      continue;
    }
    for (const auto& m : kMetrics) {
      if (!a["metrics"].contains(m.name))
        c.Add("{}: metrics.{} is missing", where, m.name);
      else if (!a["metrics"][m.name].is_null())
        CheckSummary(c, fmt::format("{}: metrics.{}", where, m.name), a["metrics"][m.name]);
    }
    const auto& d = a["decomposition"];
    if (c.Has(d, where + ": decomposition", "parts_ms", &json::is_object, "an object") &&
        c.Has(d, where + ": decomposition", "total_ms", &json::is_number, "a number")) {
      CheckSum(c, where + ": decomposition", d["parts_ms"], d["total_ms"].get<double>());
    }
    if (!CheckRaw(c, raw_name, raw, a, wl)) continue;
    raws[an] = {raw_name, raw};
    const json metrics = MetricsFromRaw(raw);
    for (const auto& m : kMetrics) {
      if (a["metrics"].contains(m.name)) {
        CompareSummaries(c, fmt::format("{}: metrics.{}", where, m.name), a["metrics"][m.name],
                         metrics[m.name], raw_name);
      }
    }
    const json derived = DecompositionFromRaw(raw);
    if (derived.is_null()) {
      c.Add("{}: {} holds no samples", where, raw_name);
    } else if (d.contains("parts_ms") && d.contains("total_ms")) {
      if (!NearlyEqual(d.value("total_ms", 0.0), derived["total_ms"].get<double>())) {
        c.Add("{}: decomposition.total_ms is {} but {} gives {}", where, d["total_ms"].dump(), raw_name,
              derived["total_ms"].dump());
      }
      if (d.value("count", int64_t{-1}) != derived["count"].get<int64_t>()) {
        c.Add("{}: decomposition.count is {} but {} holds {} samples", where, d.value("count", int64_t{-1}),
              raw_name, derived["count"].dump());
      }
      for (const auto& part : DecompositionParts()) {
        if (d["parts_ms"].contains(part) && d["parts_ms"][part].is_number() &&
            !NearlyEqual(d["parts_ms"][part].get<double>(), derived["parts_ms"][part].get<double>())) {
          c.Add("{}: decomposition.parts_ms.{} is {} but {} gives {}", where, part,
                d["parts_ms"][part].dump(), raw_name, derived["parts_ms"][part].dump());
        }
      }
    }
  }
  if (!ref_found) c.Add("reference_arm \"{}\" is none of the arms", ref);
  if (p.contains("fleet")) CheckFleet(c, p["fleet"], raws, ref);

  // Ratios follow from the arms' metrics.
  const json ratios = Ratios(p["arms"], ref);
  if (ratios.size() != p["ratios"].size()) {
    c.Add("ratios: {} entries, the arms' metrics give {}", p["ratios"].size(), ratios.size());
  } else {
    for (size_t i = 0; i < ratios.size(); ++i) {
      const auto& s = p["ratios"][i];
      for (const char* k : {"p50_ratio", "p95_ratio"}) {
        if (!s.contains(k) || !s[k].is_number() ||
            !NearlyEqual(s[k].get<double>(), ratios[i][k].get<double>())) {
          c.Add("ratios[{}] ({} {}): {} does not follow from the metrics", i,
                ratios[i]["arm"].get<std::string>(), ratios[i]["metric"].get<std::string>(), k);
        }
      }
    }
  }
}

}  // namespace

ValidationReport ValidatePacket(const std::string& packet_path) {
  ValidationReport rep;
  try {
    ValidateInto(packet_path, rep);
  } catch (const json::exception& e) {
    // A field of an unexpected type deep inside; the checks above name the common cases.
    rep.violations.push_back(fmt::format("{}: malformed structure: {}", packet_path, e.what()));
  }
  rep.valid = rep.violations.empty();
  return rep;
}

}  // namespace fak::bench
