// An arm is one engine in a comparison: fak itself (in process) or an external engine run by path.
// Every arm gets the same Workload (identical token ids, context and output lengths) and returns
// its samples in an ArmRun; a failure of the engine is data (status "failed"), never an exception
// or an error of the whole comparison.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace fak::bench {

struct Workload {
  std::string model_path;
  std::vector<std::vector<int32_t>> prompts;  // each exactly ctx tokens
  std::vector<int32_t> warmup;                // ctx tokens, run first and excluded
  int64_t ctx = 128;
  int64_t gen = 64;
  int threads = 1;
  double timeout_seconds = 1800;         // whole arm (external engines)
  double startup_timeout_seconds = 300;  // until a server answers /health
  double request_timeout_seconds = 600;  // one request
};

// One request, with its boundary decomposition: the parts are disjoint and add up to total_ms.
struct RequestSample {
  int64_t prompt_index = 0;
  bool latency_measured = true;  // ttft / itl
  double ttft_ms = 0;
  std::vector<double> itl_ms;  // one per token after the first
  double prefill_tps = 0;      // prompt tokens / prefill time
  double decode_tps = 0;       // tokens after the first / time from first to last token
  double queue_ms = 0, setup_ms = 0, prefill_ms = 0, decode_ms = 0, verification_ms = 0, recovery_ms = 0,
         other_ms = 0, total_ms = 0;
  int64_t recoveries = 0;          // times the engine dropped the request and it was resumed
  std::vector<std::string> notes;  // what went wrong on the way (recovered errors)
  std::vector<int32_t> tokens;     // greedy output ids
  // Fleet runs (fak bench fleet): which round and agent, when the request was sent (ms after the
  // round's start), and the prompt tokens the server reported as taken from its cache.
  int64_t round = -1, agent = -1;
  double start_ms = 0;
  int64_t prompt_tokens = 0, cached_tokens = -1;
  std::vector<float> first_logits;  // logits at the first generated position (vocab), when exposed
};

struct ArmRun {
  std::string spec;    // "fak:cpu", "llama.cpp:PATH/llama-bench"
  std::string name;    // file-name form: "fak-cpu", "llama.cpp", "llama.cpp-server"
  std::string engine;  // "fak", "llama.cpp"
  std::string version;
  std::string status = "ok";  // "ok" or "failed"
  std::string reason;
  std::string stderr_tail;
  bool measures_latency = false;  // TTFT / ITL
  bool exposes_tokens = false;
  bool exposes_logits = false;
  std::vector<std::string> commands;  // what ran, model path reduced to its file name
  std::vector<RequestSample> requests;
  // Throughput-only engines (llama-bench): one sample per timed repetition.
  std::vector<double> prefill_tps_samples, decode_tps_samples;
  std::vector<double> prefill_ms_samples, decode_ms_samples;
  nlohmann::json notes = nlohmann::json::object();  // how this arm measured what it measured

  void Fail(std::string why, std::string tail = "") {
    status = "failed";
    reason = std::move(why);
    stderr_tail = std::move(tail);
  }
};

class Arm {
 public:
  virtual ~Arm() = default;
  const std::string& spec() const { return spec_; }
  // Never throws and never returns early without recording why in the ArmRun.
  virtual ArmRun Run(const Workload& w) = 0;

 protected:
  explicit Arm(std::string spec) : spec_(std::move(spec)) {}
  ArmRun NewRun(const std::string& name, const std::string& engine) const;

 private:
  std::string spec_;
};

// "fak:cpu", "fak:cuda", "llama.cpp:PATH", "llama.cpp-server:PATH". An unknown kind is an error.
Result<std::unique_ptr<Arm>> MakeArm(const std::string& spec);
std::unique_ptr<Arm> MakeFakArm(const std::string& spec, const std::string& device);
std::unique_ptr<Arm> MakeLlamaBenchArm(const std::string& spec, const std::string& path);
std::unique_ptr<Arm> MakeLlamaServerArm(const std::string& spec, const std::string& path);

// The arm's file-name form for a spec ("fak:cpu" -> "fak-cpu").
std::string ArmFileName(const std::string& spec);
// `cmd` with every occurrence of model_path replaced by its file name.
std::string RedactModelPath(const std::string& cmd, const std::string& model_path);
std::string JoinCommand(const std::vector<std::string>& argv);

}  // namespace fak::bench
