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
                "verification 0; recovery: from a dropped stream to the continuation's first token; other: "
                "last token to the end of each response"},
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
  // One streamed POST /completion: the tokens and their arrival times, and how the stream ended.
  struct Segment {
    int64_t start = 0, end = 0;  // request sent, response finished
    std::vector<int32_t> tokens;
    std::vector<int64_t> times;
    double prompt_ms = -1;  // the server's timings (per token and final)
    int64_t prompt_n = -1;
    bool finished = false;   // the final event arrived
    bool malformed = false;  // an event that is not what llama-server sends: not resumable
    std::string error;       // an error event or a malformed one
  };

  static Status Stream(httplib::Client& cli, const std::vector<int32_t>& prompt, int64_t n_predict,
                       Segment* seg) {
    const nlohmann::json body = {
        {"prompt", prompt},      {"n_predict", n_predict}, {"temperature", 0},
        {"cache_prompt", false}, {"stream", true},         {"return_tokens", true},
        {"ignore_eos", true},    {"n_probs", 0},           {"timings_per_token", true}};
    SseParser sse;
    httplib::Request req;
    req.method = "POST";
    req.path = "/completion";
    req.set_header("Content-Type", "application/json");
    req.body = body.dump();
    auto timings = [seg](const nlohmann::json& ev) {
      if (!ev.contains("timings") || !ev["timings"].is_object()) return;
      seg->prompt_ms = ev["timings"].value("prompt_ms", seg->prompt_ms);
      seg->prompt_n = ev["timings"].value("prompt_n", seg->prompt_n);
    };
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      const int64_t now = NowNanos();
      sse.Feed(data, n, [&](const std::string& payload) {
        auto ev = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
        if (ev.is_discarded() || !ev.is_object()) {
          if (seg->error.empty()) {
            seg->error = fmt::format("stream event is not JSON: {:?}", payload.substr(0, 200));
          }
          seg->malformed = true;
          return;
        }
        if (ev.contains("error")) {
          if (seg->error.empty()) {
            seg->error =
                "server error: " + ev["error"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
          }
          return;
        }
        timings(ev);
        if (ev.value("stop", false)) {
          seg->finished = true;
          return;
        }
        if (ev.contains("tokens") && ev["tokens"].is_array()) {
          for (const auto& t : ev["tokens"]) {
            if (!t.is_number_integer()) continue;
            seg->tokens.push_back(t.get<int32_t>());
            seg->times.push_back(now);
          }
        }
      });
      return true;
    };
    seg->start = NowNanos();
    auto res = cli.send(req);
    seg->end = NowNanos();
    if (!res) return IoError("POST /completion: {}", httplib::to_string(res.error()));
    if (res->status != 200) {
      return IoError("POST /completion: HTTP {} {}", res->status, res->body.substr(0, 300));
    }
    if (seg->error.empty() && !seg->finished) {
      seg->error = "the stream ended without a final event";
      seg->malformed = true;
    }
    return Status::Ok();
  }

  // A request is one segment, or more when the server drops the stream with an error after some
  // tokens: the rest is asked for again with the prompt extended by the tokens so far (greedy, so the
  // continuation is the same sequence). The time from the failure to the continuation's first token
  // is recovery; the boundary gives no inter-token sample.
  Status OneRequest(httplib::Client& cli, const std::vector<int32_t>& prompt, const Workload& w,
                    int64_t index, RequestSample* out) {
    RequestSample rs;
    rs.prompt_index = index;
    std::vector<Segment> segs;
    std::vector<std::string> errors;
    std::vector<int32_t> context = prompt;
    while (static_cast<int64_t>(rs.tokens.size()) < w.gen) {
      const int64_t want = w.gen - static_cast<int64_t>(rs.tokens.size());
      Segment seg;
      FAK_RETURN_IF_ERROR(Stream(cli, context, want, &seg));
      if (seg.prompt_n >= 0 && seg.prompt_n != static_cast<int64_t>(context.size())) {
        return Corrupt("llama-server evaluated {} prompt tokens, expected {} (prompt cache in use?)",
                       seg.prompt_n, context.size());
      }
      if (static_cast<int64_t>(seg.tokens.size()) > want) {
        return Corrupt("POST /completion returned {} tokens, asked for {}", seg.tokens.size(), want);
      }
      rs.tokens.insert(rs.tokens.end(), seg.tokens.begin(), seg.tokens.end());
      context.insert(context.end(), seg.tokens.begin(), seg.tokens.end());
      const bool done = seg.error.empty();
      if (!done) errors.push_back(seg.error);
      const bool progress = !seg.tokens.empty() && !seg.malformed;
      segs.push_back(std::move(seg));
      if (done && static_cast<int64_t>(rs.tokens.size()) != w.gen) {
        return Corrupt("POST /completion returned {} tokens, expected {}", rs.tokens.size(), w.gen);
      }
      if (!done && (!progress || segs.size() > kMaxSegments)) {
        return Corrupt("POST /completion: {} (after {} of {} tokens{})", errors.back(), rs.tokens.size(),
                       w.gen, segs.size() > 1 ? fmt::format(", {} recoveries", segs.size() - 1) : "");
      }
    }
    const Segment& first = segs.front();
    // A stream dropped with an error carries no timings event: its prompt time is then unknown, and
    // the first token's whole latency counts as prefill (setup 0), as noted in the sample.
    double prompt_ms = first.prompt_ms;
    if (prompt_ms < 0 && segs.size() == 1) {
      return Corrupt("POST /completion: no timings with prompt_ms in the stream");
    }
    if (prompt_ms < 0) {
      prompt_ms = Ms(first.times.front() - first.start);
      errors.push_back("the dropped first stream reported no prompt time: TTFT counted as prefill");
    }
    int64_t decode_ns = 0, other_ns = 0, recovery_ns = 0, prev_end = 0;
    for (size_t s = 0; s < segs.size(); ++s) {
      const Segment& g = segs[s];
      if (s > 0) recovery_ns += g.times.front() - prev_end;
      decode_ns += g.times.back() - g.times.front();
      other_ns += g.end - g.times.back();
      for (size_t i = 1; i < g.times.size(); ++i) rs.itl_ms.push_back(Ms(g.times[i] - g.times[i - 1]));
      prev_end = g.end;
    }
    rs.recoveries = static_cast<int64_t>(segs.size()) - 1;
    rs.ttft_ms = Ms(first.times.front() - first.start);
    rs.total_ms = Ms(segs.back().end - first.start);
    rs.prefill_ms = std::min(prompt_ms, rs.ttft_ms);
    rs.setup_ms = rs.ttft_ms - rs.prefill_ms;
    rs.decode_ms = Ms(decode_ns);
    rs.recovery_ms = Ms(recovery_ns);
    rs.other_ms = Ms(other_ns);
    rs.prefill_tps = prompt_ms > 0 ? static_cast<double>(prompt.size()) / (prompt_ms * 1e-3) : 0;
    rs.decode_tps = decode_ns > 0 ? static_cast<double>(rs.itl_ms.size()) / (decode_ns * 1e-9) : 0;
    rs.notes = errors;
    if (out != nullptr) *out = std::move(rs);
    return Status::Ok();
  }

  static constexpr size_t kMaxSegments = 8;

  std::string path_;
};

}  // namespace

std::unique_ptr<Arm> MakeLlamaServerArm(const std::string& spec, const std::string& path) {
  return std::make_unique<LlamaServerArm>(spec, path);
}

}  // namespace fak::bench
