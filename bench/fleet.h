// fak bench fleet: a fleet of agents through real servers over HTTP. Every agent's prompt is one
// shared preamble of P tokens plus its own task of T tokens; each asks for M tokens (greedy, streamed).
// Scenarios, each on a freshly started server so that the first agent finds nothing cached:
//   sequential: the agents one after another;
//   burst:      the first agent alone, then the other N-1 at once.
// fak serve and llama-server (with N slots and cache_prompt) run the same token ids in the same run,
// arms alternating round by round. Each scenario becomes one run folder with a comparison packet
// whose "fleet" section (first agent's TTFT, the others' TTFT, aggregate decode tok/s, wall time)
// fak bench validate recomputes from the raw samples.
#pragma once

#include <string>
#include <vector>

#include "bench/compare.h"
#include "bench/prompt_set.h"
#include "core/status.h"

namespace fak::bench {

struct FleetOptions {
  std::string model_path;
  std::string fak_path;           // the fak binary whose `serve` is measured
  std::string llama_server_path;  // empty: fak alone
  std::vector<std::string> scenarios = {"sequential", "burst"};
  int64_t agents = 16;
  int64_t preamble_tokens = 1300;
  int64_t task_tokens = 30;
  int64_t gen = 32;
  int rounds = 1;
  int threads = 0;                      // 0: FAK_THREADS or every CPU
  std::vector<std::string> serve_args;  // more flags for fak serve
  std::string name = "fleet";
  std::string prompt_set_path = kDefaultPromptSet;
  std::string tokenizer_path;  // default: the model file's own tokenizer
  std::string out_root = "bench/runs";
  double startup_timeout_seconds = 300;
  double request_timeout_seconds = 1800;  // one agent's request (llama-server's burst is slow)
  std::string fak_version;
  std::vector<std::string> command_line;
  bool quiet = false;
};

// One outcome per scenario, in the order given.
Result<std::vector<CompareOutcome>> RunFleet(const FleetOptions& options);

}  // namespace fak::bench
