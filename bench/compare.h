// fak bench compare: runs every arm over the same fitted prompts and writes the run folder
// <out_root>/by-machine/<host>/<UTC timestamp>-<name>/ with manifest.json, packet.json and per arm
// <arm>-raw.json and <arm>-quality.json.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/arm.h"
#include "bench/prompt_set.h"  // kDefaultPromptSet
#include "core/status.h"

namespace fak::bench {

struct CompareOptions {
  std::string model_path;
  std::vector<std::string> arms;  // specs, see MakeArm
  int64_t prompts = 20;
  int64_t ctx = 128;
  int64_t gen = 64;
  std::string name = "compare";
  std::string reference;  // an arm spec or file name; default the first arm
  std::string prompt_set_path = kDefaultPromptSet;
  std::string tokenizer_path;  // default: the model file's own tokenizer
  std::string out_root = "bench/runs";
  int threads = 0;  // 0: FAK_THREADS or every CPU
  double arm_timeout_seconds = 1800;
  double startup_timeout_seconds = 300;
  double request_timeout_seconds = 600;
  std::string fak_version;                // recorded for fak arms and in the manifest
  std::vector<std::string> command_line;  // argv as given, recorded in the manifest
  bool quiet = false;                     // no progress lines on stderr
};

struct CompareOutcome {
  std::string run_dir;
  std::string packet_path;
  int failed_arms = 0;
};

Result<CompareOutcome> RunCompare(const CompareOptions& options);

// Everything a run folder records. RunCompare and RunFleet fill one and WriteRunFolder writes it:
// the arms' raw and quality files, manifest.json and packet.json (with a "fleet" section when
// `fleet` is not null: the given fields plus every arm's FleetFromRaw summary and the ratios).
struct RunRecord {
  std::string out_root, name, created_utc, fak_version, tokenizer_file;
  std::vector<std::string> command_line;
  std::string model_path, model_sha;
  Workload workload;  // the token ids, ctx and gen every arm got
  nlohmann::json workload_json, flags;
  std::vector<ArmRun> runs;  // names already unique
  size_t reference = 0;
  std::string load_before;
  double duration_seconds = 0;
  nlohmann::json fleet;
};

Result<CompareOutcome> WriteRunFolder(const RunRecord& record);

// The current UTC time in strftime's `format`.
std::string UtcNow(const char* format);

}  // namespace fak::bench
