// llama.cpp's llama-server, for request latency: started on a free loopback port, polled on /health
// until ready (or its deadline), sent every prompt as token ids to /completion with streaming on so
// each token's arrival is timed, and stopped afterwards. Only 127.0.0.1 is ever contacted.
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "bench/arm.h"
#include "bench/subprocess.h"
#include "core/timer.h"

namespace fak::bench {
namespace {

double Ms(int64_t ns) { return static_cast<double>(ns) * 1e-6; }

// Splits a server-sent-event stream into the JSON payloads of its "data:" lines.
class SseParser {
 public:
  // Feeds bytes; calls on_event for each complete event's data.
  template <typename F>
  void Feed(const char* data, size_t n, F&& on_event) {
    buf_.append(data, n);
    for (size_t end; (end = buf_.find("\n\n")) != std::string::npos;) {
      std::string event = buf_.substr(0, end);
      buf_.erase(0, end + 2);
      std::string payload;
      for (size_t pos = 0; pos < event.size();) {
        size_t nl = event.find('\n', pos);
        if (nl == std::string::npos) nl = event.size();
        std::string line = event.substr(pos, nl - pos);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.rfind("data:", 0) == 0) payload += line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
        if (line.rfind("error:", 0) == 0) payload += "{\"error\":" + line.substr(6) + "}";
        pos = nl + 1;
      }
      if (!payload.empty()) on_event(payload);
    }
  }

 private:
  std::string buf_;
};

class LlamaServerArm : public Arm {
 public:
  LlamaServerArm(std::string spec, std::string path) : Arm(std::move(spec)), path_(std::move(path)) {}

  ArmRun Run(const Workload& w) override {
    ArmRun r = NewRun("llama.cpp-server", "llama.cpp");
    r.measures_latency = r.exposes_tokens = true;
    r.notes = {{"ttft", "request sent to the first streamed token event (client side)"},
               {"itl", "time between consecutive streamed token events (client side)"},
               {"prefill_tps", "prompt tokens / prompt_ms, as the server's timings report them"},
               {"decode_tps", "tokens after the first / time from first to last token event (client side)"},
               {"decomposition",
                "queue 0 (one request at a time); prefill: the server's prompt_ms (capped at TTFT); setup: "
                "TTFT - prefill (HTTP, slot set-up, first sample, delivery); decode: first to last token; "
                "verification 0; recovery 0; other: last token to the end of the response"},
               {"logits", "not exposed by /completion; quality compares greedy tokens only"},
               {"warmup", "one request with the warm-up prompt, excluded"}};
    auto ver = RunProcess({path_, "--version"}, std::min(10.0, w.startup_timeout_seconds));
    if (ver.ok() && !ver->timed_out) {
      std::string all = ver->out + ver->err_tail;
      const size_t at = all.find("version:");
      if (at != std::string::npos) r.version = all.substr(at + 9, all.find('\n', at) - at - 9);
    }
    auto port = FreeLoopbackPort();
    if (!port.ok()) {
      r.Fail(port.status().ToString());
      return r;
    }
    std::vector<std::string> argv = {path_,
                                     "-m",
                                     w.model_path,
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(*port),
                                     "-c",
                                     std::to_string(w.ctx + w.gen),
                                     "-t",
                                     std::to_string(w.threads),
                                     "-np",
                                     "1"};
    r.commands.push_back(RedactModelPath(JoinCommand(argv), w.model_path));
    Timer budget;
    auto proc = Subprocess::Start(argv);
    if (!proc.ok()) {
      r.Fail(proc.status().ToString());
      return r;
    }
    Subprocess& p = **proc;
    httplib::Client cli("127.0.0.1", *port);
    cli.set_connection_timeout(2, 0);
    cli.set_read_timeout(static_cast<time_t>(w.request_timeout_seconds), 0);
    cli.set_write_timeout(30, 0);
    // Health: 200 once the model is loaded (503 while loading).
    bool healthy = false;
    while (budget.Seconds() < w.startup_timeout_seconds) {
      if (!p.Running()) {
        r.Fail(fmt::format("llama-server {} before answering /health", p.ExitDescription()), p.StderrTail());
        return r;
      }
      auto h = cli.Get("/health");
      if (h && h->status == 200) {
        healthy = true;
        break;
      }
      usleep(200000);
    }
    if (!healthy) {
      r.Fail(fmt::format("llama-server did not answer /health with 200 within {:g} s",
                         w.startup_timeout_seconds),
             p.StderrTail());
      p.Stop();
      return r;
    }
    r.notes["startup_seconds"] = budget.Seconds();
    Status s = OneRequest(cli, w.warmup, w, -1, nullptr);
    for (size_t i = 0; s.ok() && i < w.prompts.size(); ++i) {
      if (budget.Seconds() > w.timeout_seconds) {
        s = OutOfRange("arm timeout of {:.0f} s reached after {} of {} prompts", w.timeout_seconds, i,
                       w.prompts.size());
        break;
      }
      RequestSample sample;
      s = OneRequest(cli, w.prompts[i], w, static_cast<int64_t>(i), &sample);
      if (s.ok()) r.requests.push_back(std::move(sample));
    }
    if (!s.ok()) {
      const bool alive = p.Running();
      r.Fail(s.ToString() + (alive ? "" : fmt::format(" (llama-server {})", p.ExitDescription())),
             p.StderrTail());
    }
    p.Stop();
    return r;
  }

 private:
  Status OneRequest(httplib::Client& cli, const std::vector<int32_t>& prompt, const Workload& w,
                    int64_t index, RequestSample* out) {
    const nlohmann::json body = {{"prompt", prompt},      {"n_predict", w.gen}, {"temperature", 0},
                                 {"cache_prompt", false}, {"stream", true},     {"return_tokens", true},
                                 {"ignore_eos", true},    {"n_probs", 0}};
    RequestSample rs;
    rs.prompt_index = index;
    std::vector<int64_t> token_times;
    nlohmann::json final_event;
    std::string error;
    SseParser sse;
    httplib::Request req;
    req.method = "POST";
    req.path = "/completion";
    req.set_header("Content-Type", "application/json");
    req.body = body.dump();
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      const int64_t now = NowNanos();
      sse.Feed(data, n, [&](const std::string& payload) {
        auto ev = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
        if (ev.is_discarded() || !ev.is_object()) {
          if (error.empty()) error = fmt::format("stream event is not JSON: {:?}", payload.substr(0, 200));
          return;
        }
        if (ev.contains("error")) {
          if (error.empty()) error = "server error: " + ev["error"].dump();
          return;
        }
        if (ev.value("stop", false)) {
          final_event = ev;
          return;
        }
        if (ev.contains("tokens") && ev["tokens"].is_array()) {
          for (const auto& t : ev["tokens"]) {
            if (!t.is_number_integer()) continue;
            rs.tokens.push_back(t.get<int32_t>());
            token_times.push_back(now);
          }
        }
      });
      return true;
    };
    const int64_t t0 = NowNanos();
    auto res = cli.send(req);
    const int64_t t_end = NowNanos();
    if (!res) return IoError("POST /completion: {}", httplib::to_string(res.error()));
    if (res->status != 200)
      return IoError("POST /completion: HTTP {} {}", res->status, res->body.substr(0, 300));
    if (!error.empty()) return Corrupt("POST /completion: {}", error);
    if (final_event.is_null()) return Corrupt("POST /completion: the stream ended without a final event");
    if (static_cast<int64_t>(rs.tokens.size()) != w.gen) {
      return Corrupt("POST /completion returned {} tokens, expected {}", rs.tokens.size(), w.gen);
    }
    const auto timings = final_event.value("timings", nlohmann::json::object());
    const double prompt_ms = timings.value("prompt_ms", 0.0);
    const int64_t prompt_n = timings.value("prompt_n", int64_t{0});
    if (prompt_n != static_cast<int64_t>(prompt.size())) {
      return Corrupt("llama-server evaluated {} prompt tokens, expected {} (prompt cache in use?)", prompt_n,
                     prompt.size());
    }
    rs.ttft_ms = Ms(token_times.front() - t0);
    for (size_t i = 1; i < token_times.size(); ++i)
      rs.itl_ms.push_back(Ms(token_times[i] - token_times[i - 1]));
    rs.total_ms = Ms(t_end - t0);
    rs.prefill_ms = std::min(prompt_ms, rs.ttft_ms);
    rs.setup_ms = rs.ttft_ms - rs.prefill_ms;
    rs.decode_ms = Ms(token_times.back() - token_times.front());
    rs.other_ms = Ms(t_end - token_times.back());
    rs.prefill_tps = prompt_ms > 0 ? static_cast<double>(prompt_n) / (prompt_ms * 1e-3) : 0;
    rs.decode_tps = rs.decode_ms > 0 ? static_cast<double>(w.gen - 1) / (rs.decode_ms * 1e-3) : 0;
    if (out != nullptr) *out = std::move(rs);
    return Status::Ok();
  }

  std::string path_;
};

}  // namespace

std::unique_ptr<Arm> MakeLlamaServerArm(const std::string& spec, const std::string& path) {
  return std::make_unique<LlamaServerArm>(spec, path);
}

}  // namespace fak::bench
