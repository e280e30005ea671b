#include "bench/compare.h"

#include <ctime>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/arm.h"
#include "bench/hardware.h"
#include "bench/packet.h"
#include "bench/prompt_set.h"
#include "bench/quality.h"
#include "core/mapped_file.h"  // ReadFileToString
#include "core/sha256.h"
#include "core/thread_pool.h"  // DefaultThreadCount
#include "core/timer.h"
#include "formats/gguf.h"
#include "tokenizer/loader.h"

namespace fak::bench {
namespace {

namespace fs = std::filesystem;

}  // namespace

std::string UtcNow(const char* format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), format, &tm);
  return buf;
}

namespace {

Status WriteJson(const fs::path& path, const nlohmann::json& doc, std::string* sha) {
  // Engine output may hold invalid UTF-8 (a stderr tail cut anywhere): written as U+FFFD.
  const std::string text = doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::ofstream f(path, std::ios::binary);
  if (!f) return IoError("cannot write {}", path.string());
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) return IoError("writing {} failed", path.string());
  *sha = Sha256Hex({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  return Status::Ok();
}

// The type of the first attention matrix, which names the file's quantization ("q8_0").
std::string WeightType(const std::string& model_path) {
  auto g = GgufFile::Open(model_path);
  if (!g.ok()) return "unknown";
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.attn_qkv.weight", "blk.0.ffn_down.weight"}) {
    if (const auto* t = g->FindTensor(name)) return std::string(GgmlTypeName(t->type));
  }
  return "unknown";
}

void Progress(const CompareOptions& o, const std::string& line) {
  if (!o.quiet) fmt::print(stderr, "bench compare: {}\n", line);
}

}  // namespace

Result<CompareOutcome> RunCompare(const CompareOptions& o) {
  if (o.arms.empty()) return InvalidArgument("--arms: give at least one arm");
  if (o.ctx < 1) return InvalidArgument("--ctx must be at least 1, got {}", o.ctx);
  if (o.gen < 2) return InvalidArgument("--gen must be at least 2 (one inter-token latency), got {}", o.gen);
  if (o.name.empty() || o.name.find_first_of("/\\ ") != std::string::npos || o.name[0] == '.') {
    return InvalidArgument("--name '{}' must be a plain name (no slashes, spaces or leading dot)", o.name);
  }
  std::vector<std::unique_ptr<Arm>> arms;
  std::vector<std::string> names;
  for (const auto& spec : o.arms) {
    FAK_ASSIGN_OR_RETURN(auto arm, MakeArm(spec));
    std::string n = ArmFileName(spec);
    for (int k = 2; std::find(names.begin(), names.end(), n) != names.end(); ++k)
      n = ArmFileName(spec) + "-" + std::to_string(k);
    names.push_back(n);
    arms.push_back(std::move(arm));
  }
  size_t ref_index = 0;
  if (!o.reference.empty()) {
    ref_index = arms.size();
    for (size_t i = 0; i < arms.size(); ++i) {
      if (o.arms[i] == o.reference || names[i] == o.reference) ref_index = i;
    }
    if (ref_index == arms.size()) return InvalidArgument("--reference '{}' is none of the arms", o.reference);
  }
  FAK_ASSIGN_OR_RETURN(PromptSet set, LoadPromptSet(o.prompt_set_path));
  if (o.prompts < 1 || o.prompts >= static_cast<int64_t>(set.prompts.size())) {
    return InvalidArgument("--prompts must be between 1 and {} (the set has {}; one more is the warm-up)",
                           set.prompts.size() - 1, set.prompts.size());
  }
  const std::string tok_path = o.tokenizer_path.empty() ? o.model_path : o.tokenizer_path;
  auto tok = LoadTokenizer(tok_path);
  if (!tok.ok()) return tok.status().WithContext("loading the tokenizer (use --tokenizer)");
  Workload w;
  w.model_path = o.model_path;
  w.ctx = o.ctx;
  w.gen = o.gen;
  w.threads = o.threads > 0 ? o.threads : DefaultThreadCount();
  w.timeout_seconds = o.arm_timeout_seconds;
  w.startup_timeout_seconds = o.startup_timeout_seconds;
  w.request_timeout_seconds = o.request_timeout_seconds;
  for (int64_t i = 0; i <= o.prompts; ++i) {
    FAK_ASSIGN_OR_RETURN(auto ids, FitPrompt(set, static_cast<size_t>(i), o.ctx, *tok));
    if (i < o.prompts) {
      w.prompts.push_back(std::move(ids));
    } else {
      w.warmup = std::move(ids);
    }
  }
  Progress(o, fmt::format("hashing {}", o.model_path));
  FAK_ASSIGN_OR_RETURN(std::string model_sha, Sha256File(o.model_path));
  const std::string created = UtcNow("%Y-%m-%dT%H:%M:%SZ");
  const std::string load_before = LoadAverage();
  Timer total;

  std::vector<ArmRun> runs;
  for (size_t i = 0; i < arms.size(); ++i) {
    Progress(o, fmt::format("arm {} ({} of {}): {} prompts x ({} + {} tokens), {} threads", o.arms[i], i + 1,
                            arms.size(), o.prompts, o.ctx, o.gen, w.threads));
    Timer t;
    const std::string load = LoadAverage();
    runs.push_back(arms[i]->Run(w));
    ArmRun& r = runs.back();
    // Arms run one after another: the load each one saw is part of its evidence.
    r.notes["load_average_before"] = load;
    r.notes["load_average_after"] = LoadAverage();
    r.notes["wall_seconds"] = t.Seconds();
    // Engine logs name the model by its path: keep only the file name, as everywhere else.
    r.reason = RedactModelPath(r.reason, o.model_path);
    r.stderr_tail = RedactModelPath(r.stderr_tail, o.model_path);
    r.name = names[i];
    if (r.engine == "fak") r.version = o.fak_version;
    Progress(o, fmt::format("arm {}: {} in {:.1f} s{}", o.arms[i], r.status, t.Seconds(),
                            r.status == "ok" ? "" : ": " + r.reason));
  }

  RunRecord rec;
  rec.out_root = o.out_root;
  rec.name = o.name;
  rec.created_utc = created;
  rec.fak_version = o.fak_version;
  rec.command_line = o.command_line;
  rec.model_path = o.model_path;
  rec.model_sha = model_sha;
  rec.tokenizer_file = fs::path(tok_path).filename().string();
  rec.workload = w;
  rec.runs = std::move(runs);
  rec.reference = ref_index;
  rec.load_before = load_before;
  rec.workload_json = {
      {"prompt_set", {{"file", set.file_name}, {"version", set.version}, {"sha256", set.sha256}}},
      {"prompts", o.prompts},
      {"ctx", o.ctx},
      {"gen", o.gen},
      {"warmup_runs", 1},
      {"threads", w.threads},
      {"sampling", "greedy, end-of-sequence ignored: every request generates exactly gen tokens"},
      {"fit_rule",
       "v1: prompt i encoded (tokenizer's BOS rule), then \"\\n\\n\" + the following prompts' texts appended "
       "until >= ctx tokens, cut to ctx; warm-up: prompt N"}};
  rec.flags = {{"arms", o.arms.size()},
               {"reference", rec.runs[ref_index].name},
               {"arm_timeout_seconds", o.arm_timeout_seconds},
               {"startup_timeout_seconds", o.startup_timeout_seconds},
               {"request_timeout_seconds", o.request_timeout_seconds}};
  rec.duration_seconds = total.Seconds();
  return WriteRunFolder(rec);
}

Result<CompareOutcome> WriteRunFolder(const RunRecord& rec) {
  const std::vector<ArmRun>& runs = rec.runs;
  const size_t ref_index = rec.reference;
  const Workload& w = rec.workload;
  const std::string model_file = fs::path(rec.model_path).filename().string();
  const uint64_t model_size = fs::file_size(rec.model_path);
  const std::string host = HostName();
  const fs::path rel = fs::path("by-machine") / host / (UtcNow("%Y%m%dT%H%M%SZ") + "-" + rec.name);
  fs::path dir = fs::path(rec.out_root) / rel;
  for (int k = 2; fs::exists(dir); ++k)
    dir = fs::path(rec.out_root) / (rel.string() + "-" + std::to_string(k));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("cannot create {}: {}", dir.string(), ec.message());

  nlohmann::json files = nlohmann::json::object();
  nlohmann::json arms_json = nlohmann::json::array();
  nlohmann::json fleet_arms = nlohmann::json::object();
  CompareOutcome out;
  for (size_t i = 0; i < runs.size(); ++i) {
    const ArmRun& r = runs[i];
    const nlohmann::json raw = RawDoc(r, w);
    const QualityResult q = EvaluateQuality(r, runs[ref_index]);
    const std::string raw_name = r.name + "-raw.json", q_name = r.name + "-quality.json";
    std::string sha;
    FAK_RETURN_IF_ERROR(WriteJson(dir / raw_name, raw, &sha));
    files[raw_name] = sha;
    FAK_RETURN_IF_ERROR(WriteJson(dir / q_name, q.doc, &sha));
    files[q_name] = sha;
    out.failed_arms += r.status != "ok";
    const bool ok = r.status == "ok";
    if (!rec.fleet.is_null()) fleet_arms[r.name] = ok ? FleetFromRaw(raw) : nlohmann::json(nullptr);
    arms_json.push_back(
        {{"name", r.name},
         {"spec", RedactModelPath(r.spec, rec.model_path)},
         {"engine", r.engine},
         {"version", r.version},
         {"status", r.status},
         {"reason", r.reason},
         {"stderr_tail", r.stderr_tail},
         {"measures",
          {{"latency", r.measures_latency}, {"tokens", r.exposes_tokens}, {"logits", r.exposes_logits}}},
         {"samples", {{"requests", r.requests.size()}, {"repetitions", r.prefill_tps_samples.size()}}},
         {"metrics", ok ? MetricsFromRaw(raw) : nlohmann::json(nullptr)},
         {"decomposition", ok ? DecompositionFromRaw(raw) : nlohmann::json(nullptr)},
         {"quality",
          {{"verdict", q.verdict},
           {"token_matches", q.doc["summary"]["token_matches"]},
           {"prompts", q.doc["summary"]["prompts"]},
           {"min_cosine", q.doc["summary"]["min_cosine"]}}},
         {"files", {{"raw", raw_name}, {"quality", q_name}}}});
  }

  nlohmann::json arm_manifest = nlohmann::json::array();
  for (const auto& r : runs) {
    arm_manifest.push_back(
        {{"name", r.name}, {"spec", r.spec}, {"version", r.version}, {"commands", r.commands}});
  }
  std::vector<std::string> cmd;
  for (const auto& a : rec.command_line) cmd.push_back(RedactModelPath(a, rec.model_path));
  nlohmann::json prompt_ids = {{"warmup", w.warmup}, {"measured", w.prompts}};
  nlohmann::json manifest = {
      {"schema", kManifestSchema},
      {"name", rec.name},
      {"created_utc", rec.created_utc},
      {"command", JoinCommand(cmd)},
      {"fak_version", rec.fak_version},
      {"model", {{"file", model_file}, {"sha256", rec.model_sha}, {"size_bytes", model_size}}},
      {"tokenizer", rec.tokenizer_file},
      {"workload", rec.workload_json},
      {"flags", rec.flags},
      {"arms", arm_manifest},
      {"load_average", {{"before", rec.load_before}, {"after", LoadAverage()}}},
      {"prompt_token_ids", prompt_ids},
      {"duration_seconds", rec.duration_seconds}};
  std::string sha;
  FAK_RETURN_IF_ERROR(WriteJson(dir / "manifest.json", manifest, &sha));
  files["manifest.json"] = sha;

  nlohmann::json packet = {
      {"schema", kPacketSchema},
      {"run",
       {{"name", rec.name},
        {"created_utc", rec.created_utc},
        {"folder", rel.string()},
        {"fak_version", rec.fak_version}}},
      {"hardware", CollectHardware()},
      {"model",
       {{"file", model_file},
        {"sha256", rec.model_sha},
        {"size_bytes", model_size},
        {"weight_type", WeightType(rec.model_path)}}},
      {"workload", rec.workload_json},
      {"quality_policy",
       {{"name", kQualityPolicy}, {"version", kQualityPolicyVersion}, {"cosine_min", kCosineMin}}},
      {"reference_arm", runs[ref_index].name},
      {"arms", arms_json},
      {"ratios", Ratios(arms_json, runs[ref_index].name)},
      {"files", files}};
  if (!rec.fleet.is_null()) {
    nlohmann::json fleet = rec.fleet;
    fleet["arms"] = fleet_arms;
    fleet["ratios"] = FleetRatios(fleet_arms, runs[ref_index].name);
    packet["fleet"] = std::move(fleet);
  }
  FAK_RETURN_IF_ERROR(WriteJson(dir / "packet.json", packet, &sha));
  out.run_dir = dir.string();
  out.packet_path = (dir / "packet.json").string();
  return out;
}

}  // namespace fak::bench
