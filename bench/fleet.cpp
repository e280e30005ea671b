#include "bench/fleet.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/hardware.h"  // LoadAverage
#include "bench/http_stream.h"
#include "bench/subprocess.h"
#include "core/sha256.h"
#include "core/thread_pool.h"  // DefaultThreadCount
#include "core/timer.h"
#include "tokenizer/loader.h"

namespace fak::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// One engine behind its HTTP server.
struct ServerArm {
  std::string name;  // file-name form
  std::string engine;
  std::string spec;
  std::string path;
  bool fak = false;
  std::string version;
};

// The task of agent `agent`: "\n\nAgent K asks: " + a prompt of the set (then the following ones),
// encoded without special tokens and cut to exactly `n` tokens.
Result<std::vector<int32_t>> TaskTokens(const PromptSet& set, int64_t agent, int64_t n,
                                        const Tokenizer& tok) {
  std::vector<int32_t> out;
  const EncodeOptions plain{.add_special = false};
  std::string text = fmt::format("\n\nAgent {} asks: ", agent);
  for (size_t k = 0; static_cast<int64_t>(out.size()) < n; ++k) {
    if (k > static_cast<size_t>(n) + set.prompts.size()) return Internal("the prompt set yields no tokens");
    text += set.prompts[(static_cast<size_t>(agent) + 1 + k) % set.prompts.size()].text;
    FAK_ASSIGN_OR_RETURN(out, tok.Encode(text, plain));
    text += "\n\n";
  }
  out.resize(static_cast<size_t>(n));
  return out;
}

class FleetServer {
 public:
  FleetServer(const ServerArm& arm, const FleetOptions& o, const Workload& w) : arm_(arm), o_(o), w_(w) {}

  // Starts the server on a free port and waits until /health answers 200.
  Status Start(ArmRun* run) {
    FAK_ASSIGN_OR_RETURN(port_, FreeLoopbackPort());
    const int64_t per_seq = (w_.ctx + w_.gen + 255) / 256 * 256;
    std::vector<std::string> argv;
    if (arm_.fak) {
      argv = {arm_.path,    "serve",
              "-m",         w_.model_path,
              "--host",     "127.0.0.1",
              "--port",     std::to_string(port_),
              "-t",         std::to_string(w_.threads),
              "--parallel", std::to_string(o_.agents),
              "-c",         std::to_string(per_seq)};
      argv.insert(argv.end(), o_.serve_args.begin(), o_.serve_args.end());
    } else {
      argv = {arm_.path,
              "-m",
              w_.model_path,
              "--host",
              "127.0.0.1",
              "--port",
              std::to_string(port_),
              "-t",
              std::to_string(w_.threads),
              "-np",
              std::to_string(o_.agents),
              "-c",
              std::to_string(per_seq * o_.agents)};
    }
    const std::string cmd = RedactModelPath(JoinCommand(argv), w_.model_path);
    if (run->commands.empty() || run->commands.back() != cmd) run->commands.push_back(cmd);
    FAK_ASSIGN_OR_RETURN(proc_, Subprocess::Start(argv));
    Timer t;
    while (t.Seconds() < o_.startup_timeout_seconds) {
      if (!proc_->Running()) {
        return IoError("{} {} before answering /health: {}", arm_.name, proc_->ExitDescription(), Tail());
      }
      auto h = LoopbackRequest(port_, "GET", "/health", "", 2);
      if (h.ok() && h->status == 200) return Status::Ok();
      usleep(100000);
    }
    return IoError("{} did not answer /health with 200 within {:g} s", arm_.name, o_.startup_timeout_seconds);
  }

  void Stop() {
    if (proc_) proc_->Stop(5);
  }
  bool Running() { return proc_ && proc_->Running(); }
  std::string Tail() { return proc_ ? RedactModelPath(proc_->StderrTail(), w_.model_path) : ""; }

  // One streamed request; times are taken as the bytes arrive. `t0` is the round's start.
  Result<RequestSample> Agent(const std::vector<int32_t>& prompt, int64_t t0) const {
    json body;
    std::string path;
    if (arm_.fak) {
      path = "/v1/completions";
      body = {{"prompt", prompt},        {"max_tokens", w_.gen},
              {"temperature", 0},        {"ignore_eos", true},
              {"stream", true},          {"stream_options", {{"include_usage", true}}},
              {"return_token_ids", true}};
    } else {
      path = "/completion";
      body = {{"prompt", prompt}, {"n_predict", w_.gen},   {"temperature", 0},   {"cache_prompt", true},
              {"stream", true},   {"return_tokens", true}, {"ignore_eos", true}, {"n_probs", 0}};
    }
    RequestSample rs;
    std::vector<int64_t> times;
    std::string error;
    bool finished = false;
    int64_t prompt_n = -1, cached = -1;
    SseParser sse;
    const int64_t sent = NowNanos();
    auto reply = LoopbackRequest(
        port_, "POST", path, body.dump(), o_.request_timeout_seconds, [&](std::string_view data) {
          const int64_t now = NowNanos();
          sse.Feed(data, [&](const std::string& payload) {
            if (payload == "[DONE]") {
              finished = true;
              return;
            }
            const json ev = json::parse(payload, nullptr, /*allow_exceptions=*/false);
            if (ev.is_discarded() || !ev.is_object()) {
              if (error.empty())
                error = fmt::format("a stream event is not JSON: {:?}", payload.substr(0, 200));
              return;
            }
            if (ev.contains("error")) {
              if (error.empty()) error = "server error: " + ev["error"].dump();
              return;
            }
            if (arm_.fak) {
              if (ev.contains("usage") && ev["usage"].is_object()) {
                prompt_n = ev["usage"].value("prompt_tokens", int64_t{-1});
                if (ev["usage"].contains("prompt_tokens_details"))
                  cached = ev["usage"]["prompt_tokens_details"].value("cached_tokens", int64_t{-1});
              }
              if (!ev.contains("choices") || !ev["choices"].is_array()) return;
              for (const auto& ch : ev["choices"]) {
                if (!ch.contains("token_ids") || !ch["token_ids"].is_array()) continue;
                for (const auto& t : ch["token_ids"]) {
                  rs.tokens.push_back(t.get<int32_t>());
                  times.push_back(now);
                }
              }
            } else {
              if (ev.contains("tokens") && ev["tokens"].is_array() && !ev.value("stop", false)) {
                for (const auto& t : ev["tokens"]) {
                  if (!t.is_number_integer()) continue;
                  rs.tokens.push_back(t.get<int32_t>());
                  times.push_back(now);
                }
              }
              if (ev.value("stop", false)) {
                finished = true;
                if (ev.contains("timings") && ev["timings"].is_object()) {
                  const int64_t evaluated = ev["timings"].value("prompt_n", int64_t{-1});
                  if (evaluated >= 0) cached = static_cast<int64_t>(prompt.size()) - evaluated;
                }
                prompt_n = static_cast<int64_t>(prompt.size());
              }
            }
          });
          return true;
        });
    const int64_t end = NowNanos();
    if (!reply.ok()) return reply.status();
    if (reply->status != 200) return IoError("POST {}: HTTP {}", path, reply->status);
    if (!error.empty()) return IoError("POST {}: {}", path, error);
    if (!finished) return IoError("POST {}: the stream ended without its final event", path);
    if (static_cast<int64_t>(rs.tokens.size()) != w_.gen) {
      return Corrupt("POST {}: {} tokens streamed, asked for {}", path, rs.tokens.size(), w_.gen);
    }
    if (prompt_n != static_cast<int64_t>(prompt.size())) {
      return Corrupt("POST {}: the server counted {} prompt tokens, {} were sent", path, prompt_n,
                     prompt.size());
    }
    rs.prompt_tokens = prompt_n;
    rs.cached_tokens = cached;
    rs.start_ms = Ms(sent - t0);
    rs.ttft_ms = Ms(times.front() - sent);
    for (size_t i = 1; i < times.size(); ++i) rs.itl_ms.push_back(Ms(times[i] - times[i - 1]));
    rs.total_ms = Ms(end - sent);
    rs.prefill_ms = rs.ttft_ms;
    rs.decode_ms = Ms(times.back() - times.front());
    rs.other_ms = rs.total_ms - rs.prefill_ms - rs.decode_ms;
    rs.prefill_tps = rs.ttft_ms > 0 ? static_cast<double>(prompt.size()) / (rs.ttft_ms * 1e-3) : 0;
    rs.decode_tps = rs.decode_ms > 0 ? static_cast<double>(rs.itl_ms.size()) / (rs.decode_ms * 1e-3) : 0;
    return rs;
  }

 private:
  const ServerArm& arm_;
  const FleetOptions& o_;
  const Workload& w_;
  int port_ = 0;
  std::unique_ptr<Subprocess> proc_;
};

// One scenario round of one arm on a fresh server: the warm-up request, then the agents.
Status RunRound(const ServerArm& arm, const FleetOptions& o, const Workload& w, const std::string& scenario,
                int round, ArmRun* run) {
  FleetServer server(arm, o, w);
  Status s = server.Start(run);
  if (!s.ok()) {
    server.Stop();
    return s;
  }
  auto warm = server.Agent(w.warmup, NowNanos());
  if (!warm.ok()) {
    const std::string tail = server.Tail();
    server.Stop();
    return warm.status().WithContext("the warm-up request" + (tail.empty() ? "" : ": " + tail));
  }
  const size_t n = static_cast<size_t>(o.agents);
  std::vector<Result<RequestSample>> got(n, Result<RequestSample>(Internal("not run")));
  const int64_t t0 = NowNanos();
  if (scenario == "sequential") {
    for (size_t a = 0; a < n; ++a) {
      got[a] = server.Agent(w.prompts[a], t0);
      if (!got[a].ok()) break;
    }
  } else {
    got[0] = server.Agent(w.prompts[0], t0);
    if (got[0].ok()) {
      std::atomic<bool> go{false};
      std::vector<std::thread> ts;
      for (size_t a = 1; a < n; ++a) {
        ts.emplace_back([&, a] {
          while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
          got[a] = server.Agent(w.prompts[a], t0);
        });
      }
      go.store(true, std::memory_order_release);
      for (auto& t : ts) t.join();
    }
  }
  const bool alive = server.Running();
  const std::string tail = server.Tail();
  server.Stop();
  for (size_t a = 0; a < n; ++a) {
    if (!got[a].ok()) {
      run->stderr_tail = tail;
      return got[a].status().WithContext(
          fmt::format("round {}, agent {}{}", round, a, alive ? "" : " (the server exited)"));
    }
    RequestSample rs = std::move(*got[a]);
    rs.round = round;
    rs.agent = static_cast<int64_t>(a);
    rs.prompt_index = round * o.agents + static_cast<int64_t>(a);
    run->requests.push_back(std::move(rs));
  }
  return Status::Ok();
}

std::string Version(const std::string& path) {
  auto ver = RunProcess({path, "--version"}, 10);
  if (!ver.ok() || ver->timed_out) return "";
  const std::string all = ver->out + ver->err_tail;
  const size_t at = all.find("version:");
  if (at == std::string::npos) return "";
  return all.substr(at + 9, all.find('\n', at) - at - 9);
}

void Progress(const FleetOptions& o, const std::string& line) {
  if (!o.quiet) fmt::print(stderr, "bench fleet: {}\n", line);
}

}  // namespace

Result<std::vector<CompareOutcome>> RunFleet(const FleetOptions& o) {
  if (o.agents < 2)
    return InvalidArgument("--agents must be at least 2 (a first agent and the rest), got {}", o.agents);
  if (o.preamble_tokens < 1 || o.task_tokens < 1)
    return InvalidArgument("--preamble and --task must be at least 1 token each");
  if (o.gen < 2) return InvalidArgument("--gen must be at least 2 (one inter-token latency), got {}", o.gen);
  if (o.rounds < 1) return InvalidArgument("--rounds must be at least 1, got {}", o.rounds);
  if (o.scenarios.empty()) return InvalidArgument("--scenarios: give sequential, burst or both");
  for (const auto& s : o.scenarios) {
    if (s != "sequential" && s != "burst")
      return InvalidArgument("--scenarios: '{}' is neither sequential nor burst", s);
  }
  if (o.name.empty() || o.name.find_first_of("/\\ ") != std::string::npos || o.name[0] == '.') {
    return InvalidArgument("--name '{}' must be a plain name (no slashes, spaces or leading dot)", o.name);
  }
  if (o.fak_path.empty() || access(o.fak_path.c_str(), X_OK) != 0)
    return NotFound("the fak binary '{}' is not an executable file", o.fak_path);
  if (!o.llama_server_path.empty() && access(o.llama_server_path.c_str(), X_OK) != 0)
    return NotFound("--llama-server '{}' is not an executable file", o.llama_server_path);

  FAK_ASSIGN_OR_RETURN(PromptSet set, LoadPromptSet(o.prompt_set_path));
  const std::string tok_path = o.tokenizer_path.empty() ? o.model_path : o.tokenizer_path;
  auto tok = LoadTokenizer(tok_path);
  if (!tok.ok()) return tok.status().WithContext("loading the tokenizer (use --tokenizer)");
  Workload w;
  w.model_path = o.model_path;
  w.ctx = o.preamble_tokens + o.task_tokens;
  w.gen = o.gen;
  w.threads = o.threads > 0 ? o.threads : DefaultThreadCount();
  FAK_ASSIGN_OR_RETURN(auto preamble, FitPrompt(set, 0, o.preamble_tokens, *tok));
  std::vector<std::vector<int32_t>> agents;
  for (int64_t a = 0; a < o.agents; ++a) {
    FAK_ASSIGN_OR_RETURN(auto task, TaskTokens(set, a, o.task_tokens, *tok));
    std::vector<int32_t> p = preamble;
    p.insert(p.end(), task.begin(), task.end());
    agents.push_back(std::move(p));
  }
  for (int r = 0; r < o.rounds; ++r) w.prompts.insert(w.prompts.end(), agents.begin(), agents.end());
  FAK_ASSIGN_OR_RETURN(w.warmup, FitPrompt(set, set.prompts.size() - 1, w.ctx, *tok));

  std::vector<ServerArm> arms = {{"fak-serve", "fak", "fak:serve", o.fak_path, true, o.fak_version}};
  if (!o.llama_server_path.empty()) {
    arms.push_back({"llama.cpp-server", "llama.cpp", "llama.cpp-server:" + o.llama_server_path,
                    o.llama_server_path, false, Version(o.llama_server_path)});
  }
  const size_t ref = arms.size() - 1;  // llama-server when it runs
  Progress(o, fmt::format("hashing {}", o.model_path));
  FAK_ASSIGN_OR_RETURN(std::string model_sha, Sha256File(o.model_path));
  const std::string created = UtcNow("%Y-%m-%dT%H:%M:%SZ");
  const std::string load_before = LoadAverage();
  Timer total;

  // runs[scenario][arm]
  std::vector<std::vector<ArmRun>> runs(o.scenarios.size());
  for (auto& per : runs) {
    for (const auto& a : arms) {
      ArmRun r;
      r.spec = a.spec;
      r.name = a.name;
      r.engine = a.engine;
      r.version = a.version;
      r.measures_latency = r.exposes_tokens = true;
      r.notes = {
          {"ttft", "request sent to the arrival of the first streamed token (client side, plain socket)"},
          {"itl", "between the arrivals of consecutive streamed tokens (client side)"},
          {"prefill_tps", "prompt tokens (cached ones included) / TTFT"},
          {"decode_tps", "tokens after the first / time from first to last token"},
          {"decomposition",
           "prefill: TTFT (queueing in the server included); decode: first to last token; other: last token "
           "to the end of the response; the rest 0"},
          {"request",
           a.fak ? "POST /v1/completions, prompt as token ids, stream, return_token_ids, ignore_eos, "
                   "temperature 0"
                 : "POST /completion, prompt as token ids, stream, return_tokens, cache_prompt, ignore_eos, "
                   "temperature 0"},
          {"warmup", "one request with an unrelated prompt on each fresh server, excluded"}};
      per.push_back(std::move(r));
    }
  }
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t s = 0; s < o.scenarios.size(); ++s) {
      for (size_t k = 0; k < arms.size(); ++k) {
        const size_t i = round % 2 == 0 ? k : arms.size() - 1 - k;  // alternate the order by round
        ArmRun& run = runs[s][i];
        if (run.status != "ok") continue;
        Progress(
            o, fmt::format("round {} of {}, {}, {}: {} agents x ({} + {} prompt tokens, {} out), {} threads",
                           round + 1, o.rounds, o.scenarios[s], arms[i].name, o.agents, o.preamble_tokens,
                           o.task_tokens, o.gen, w.threads));
        Timer t;
        const Status st = RunRound(arms[i], o, w, o.scenarios[s], round, &run);
        run.notes[fmt::format("round_{}_wall_seconds", round)] = t.Seconds();
        if (!st.ok()) {
          run.Fail(RedactModelPath(st.ToString(), o.model_path), run.stderr_tail);
          Progress(o, fmt::format("{} failed: {}", arms[i].name, run.reason));
        } else {
          Progress(o, fmt::format("{} done in {:.1f} s", arms[i].name, t.Seconds()));
        }
        sleep(1);
      }
    }
  }

  std::vector<CompareOutcome> outs;
  for (size_t s = 0; s < o.scenarios.size(); ++s) {
    RunRecord rec;
    rec.out_root = o.out_root;
    rec.name = o.name + "-" + o.scenarios[s];
    rec.created_utc = created;
    rec.fak_version = o.fak_version;
    rec.command_line = o.command_line;
    rec.model_path = o.model_path;
    rec.model_sha = model_sha;
    rec.tokenizer_file = fs::path(tok_path).filename().string();
    rec.workload = w;
    rec.runs = runs[s];
    rec.reference = ref;
    rec.load_before = load_before;
    rec.duration_seconds = total.Seconds();
    const std::string what = o.scenarios[s] == "sequential" ? "the agents one after another"
                                                            : "the first agent alone, then the rest at once";
    rec.workload_json = {
        {"prompt_set", {{"file", set.file_name}, {"version", set.version}, {"sha256", set.sha256}}},
        {"prompts", w.prompts.size()},
        {"ctx", w.ctx},
        {"gen", w.gen},
        {"warmup_runs", 1},
        {"threads", w.threads},
        {"sampling", "greedy, end-of-sequence ignored: every request generates exactly gen tokens"},
        {"fit_rule",
         "fleet v1: the preamble is prompt 0 fitted to preamble_tokens (the compare rule); agent K's task is "
         "\"\\n\\nAgent K asks: \" + prompt K+1 (and the following ones), encoded without special tokens and "
         "cut "
         "to task_tokens; prompt i = round i / agents, agent i % agents; warm-up: prompt N-1 fitted to ctx"},
        {"scenario", o.scenarios[s]},
        {"agents", o.agents},
        {"rounds", o.rounds},
        {"preamble_tokens", o.preamble_tokens},
        {"task_tokens", o.task_tokens}};
    rec.flags = {{"arms", arms.size()},
                 {"reference", arms[ref].name},
                 {"serve_args", o.serve_args},
                 {"startup_timeout_seconds", o.startup_timeout_seconds},
                 {"request_timeout_seconds", o.request_timeout_seconds}};
    rec.fleet = {{"scenario", o.scenarios[s]},
                 {"description", what},
                 {"agents", o.agents},
                 {"rounds", o.rounds},
                 {"preamble_tokens", o.preamble_tokens},
                 {"task_tokens", o.task_tokens},
                 {"a_fresh_server_per_round", true}};
    FAK_ASSIGN_OR_RETURN(auto out, WriteRunFolder(rec));
    outs.push_back(std::move(out));
  }
  return outs;
}

}  // namespace fak::bench
