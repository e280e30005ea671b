#include "server/server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <ctime>
#include <mutex>
#include <random>

#include "core/log.h"

namespace fak::server {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

void SendJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(Dump(body), "application/json");
}

void SendError(httplib::Response& res, const ApiError& e) {
  SendJson(res, e.http_status, ErrorBody(e));
  if (e.http_status == 503) res.set_header("Retry-After", "1");
}

ApiError ErrorOf(int status, std::string type, std::string message, std::string code = "") {
  ApiError e;
  e.http_status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

// A scheduler status as the client sees it.
ApiError FromStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kBusy: return ErrorOf(503, "server_busy", s.message(), "server_busy");
    case StatusCode::kOutOfRange:
      return ErrorOf(400, "invalid_request_error", s.message(), "context_length_exceeded");
    case StatusCode::kInvalidArgument: return ErrorOf(400, "invalid_request_error", s.message());
    default: return ErrorOf(500, "server_error", s.message());
  }
}

std::string NewId(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu);
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

bool SameKey(const std::string& a, const std::string& b) {
  // Compares every byte whatever the first difference (no timing hint about the key).
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

// One request's progress, shared by the HTTP thread and the stream's releaser.
struct Call {
  Endpoint endpoint;
  std::shared_ptr<RequestHandle> handle;
  std::string id;
  int64_t created = 0;
  std::string model;
  bool logprobs = false;
  bool include_usage = false;
  bool token_ids = false;
  std::string text;
  std::vector<TokenOut> tokens;
  int64_t text_offset = 0;
  Clock::time_point last_token;
  bool any_token = false;
  Metrics* metrics = nullptr;
  const Tokenizer* tokenizer = nullptr;
  std::unique_ptr<ToolCallParser> tool_parser;  // null: no tools offered

  // The client's share of new text: all of it, or what cannot begin a tool call.
  std::string Content(const std::string& text) { return tool_parser ? tool_parser->Push(text) : text; }
  // At the end: the held-back text and the tool calls.
  std::string EndContent(std::vector<ToolCall>* calls, bool truncated) {
    calls->clear();
    return tool_parser ? tool_parser->Finish(calls, truncated) : std::string();
  }

  // Latency metrics for the tokens of one delta.
  void Observe(const std::vector<TokenOut>& ts) {
    for (const auto& t : ts) {
      const auto since = any_token ? t.at - last_token : t.at - handle->submitted();
      const double s = std::chrono::duration<double>(since).count();
      if (any_token) {
        metrics->ObserveItl(s);
      } else {
        metrics->ObserveTtft(s);
      }
      any_token = true;
      last_token = t.at;
    }
  }

  nlohmann::json Choice(const std::string& delta_text, const std::vector<TokenOut>& ts, bool stream,
                        const std::string& finish) {
    nlohmann::json c = {{"index", 0}};
    if (endpoint == Endpoint::kChat) {
      if (stream) {
        c["delta"] = delta_text.empty() && !finish.empty() ? nlohmann::json::object()
                                                           : nlohmann::json({{"content", delta_text}});
      } else {
        c["message"] = {{"role", "assistant"}, {"content", delta_text}};
      }
    } else {
      c["text"] = delta_text;
    }
    c["logprobs"] = logprobs && !ts.empty() ? LogprobsJson(endpoint, ts, *tokenizer, text_offset) : nullptr;
    c["finish_reason"] = finish.empty() ? nlohmann::json(nullptr) : nlohmann::json(finish);
    if (token_ids) {
      nlohmann::json ids = nlohmann::json::array();
      for (const auto& t : ts) ids.push_back(t.id);
      c["token_ids"] = std::move(ids);
    }
    return c;
  }

  nlohmann::json Envelope(bool stream) const {
    const char* object = endpoint == Endpoint::kChat ? (stream ? "chat.completion.chunk" : "chat.completion")
                                                     : "text_completion";
    return {{"id", id},
            {"object", object},
            {"created", created},
            {"model", model},
            {"system_fingerprint", "fak"}};
  }
};

std::string SseEvent(const nlohmann::json& j) { return "data: " + Dump(j) + "\n\n"; }

nlohmann::json ToolCallsJson(const std::vector<ToolCall>& calls, bool stream) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    nlohmann::json c = {{"id", calls[i].id},
                        {"type", "function"},
                        {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (stream) c["index"] = i;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

Server::Server(ServerOptions options)
    : options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  created_ = static_cast<int64_t>(std::time(nullptr));
  // The listening socket: SO_REUSEADDR (a restart binds a port whose old connections linger), not the
  // library's default SO_REUSEPORT, under which a second server on the same port would bind too and
  // silently take a share of the connections.
  http_->set_socket_options([this](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (listen_fd_ < 0) listen_fd_ = sock;
  });
  Routes();
}

Server::~Server() = default;

Status Server::Bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ <= 0) return IoError("cannot bind {} to a free port", options_.host);
  } else {
    if (!http_->bind_to_port(options_.host, options_.port)) {
      return IoError("cannot bind {}:{} (in use, or not an address of this machine)", options_.host,
                     options_.port);
    }
    port_ = options_.port;
  }
  // The library listens with a backlog of 5. A fleet of agents connecting at once overflows that, the
  // kernel drops the connections it cannot queue, and their clients send again only after a second: a
  // second added to those agents' time to first token (measured: a burst of 31 agents, p95 1,036 ms
  // against p50 82 ms). Listening again sets the backlog on Linux.
  if (listen_fd_ >= 0) ::listen(listen_fd_, SOMAXCONN);
  return Status::Ok();
}

void Server::Serve() { http_->listen_after_bind(); }

void Server::Stop() { http_->stop(); }

void Server::Ready(Scheduler* scheduler, ModelInfo model) {
  model_ = std::move(model);
  scheduler_.store(scheduler);
}

void Server::Routes() {
  httplib::Server& s = *http_;
  const int threads = std::max(options_.http_threads, 4);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_write_timeout(options_.write_timeout_seconds, 0);
  s.set_read_timeout(30, 0);
  s.set_keep_alive_timeout(5);
  s.set_tcp_nodelay(true);

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_keys.empty() || req.path == "/health")
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ";
    if (auth.compare(0, bearer.size(), bearer) == 0) {
      const std::string key = auth.substr(bearer.size());
      for (const auto& k : options_.api_keys) {
        if (SameKey(k, key)) return httplib::Server::HandlerResponse::Unhandled;
      }
    }
    SendError(res, ErrorOf(401, "invalid_request_error",
                           auth.empty() ? "this server needs an API key: send \"Authorization: Bearer KEY\""
                                        : "the API key is not valid",
                           "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string msg;
        if (res.status == 404) {
          msg = fmt::format("no endpoint {} {}", req.method, req.path);
        } else if (res.status == 413) {
          msg = "the request body is larger than this server accepts (--max-body)";
        } else {
          msg = fmt::format("HTTP {}", res.status);
        }
        SendError(res, ErrorOf(res.status, "invalid_request_error", msg));
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(res, ErrorOf(500, "server_error", "internal error: " + what));
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    static const char* kKnown[] = {
        "/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics", "/v1/cache"};
    std::string ep = "other";
    for (const char* k : kKnown) {
      if (req.path == k) ep = k;
    }
    metrics_.CountRequest(ep, res.status);
  });

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (scheduler_.load() == nullptr) {
      SendJson(res, 503, {{"status", "loading"}});
      res.set_header("Retry-After", "1");
    } else {
      SendJson(res, 200, {{"status", "ok"}});
    }
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    Scheduler* sched = scheduler_.load();
    SchedulerStats st;
    if (sched != nullptr) st = sched->stats();
    res.set_content(metrics_.Render(sched != nullptr ? &st : nullptr), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    if (scheduler_.load() == nullptr) {
      SendError(res, ErrorOf(503, "server_busy", "the model is still loading", "model_loading"));
      return;
    }
    SendJson(res, 200,
             {{"object", "list"},
              {"data", nlohmann::json::array({{{"id", model_.id},
                                               {"object", "model"},
                                               {"created", created_},
                                               {"owned_by", "fak"},
                                               {"context_length", model_.context}}})}});
  });
  s.Delete("/v1/cache", [this](const httplib::Request&, httplib::Response& res) {
    Scheduler* sched = scheduler_.load();
    if (sched == nullptr) {
      SendError(res, ErrorOf(503, "server_busy", "the model is still loading", "model_loading"));
      return;
    }
    sched->ClearCache();
    const SchedulerStats st = sched->stats();
    SendJson(res, 200,
             {{"entries", st.cache.entries},
              {"pinned_tokens", st.cache.pinned_tokens},
              {"kv_pages_used", st.kv_pages_used},
              {"kv_pages_free", st.kv_pages_free}});
  });

  auto completion = [this](Endpoint ep, const httplib::Request& req, httplib::Response& res) {
    Scheduler* sched = scheduler_.load();
    if (sched == nullptr) {
      SendError(res, ErrorOf(503, "server_busy", "the model is still loading", "model_loading"));
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    Json body;
    try {
      body = Json::parse(req.body);
    } catch (const nlohmann::json::exception& e) {
      SendError(res, ErrorOf(400, "invalid_request_error",
                             fmt::format("the request body is not valid JSON: {}", e.what())));
      return;
    }
    ApiRequest api;
    ApiError err;
    if (!ParseRequest(ep, body, model_, &api, &err)) {
      SendError(res, err);
      return;
    }
    if (GetLogLevel() <= LogLevel::kDebug) {
      FAK_LOG_DEBUG("a request of {} prompt tokens parsed, rendered and tokenized in {:.3f} ms",
                    api.gen.prompt.size(),
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    auto handle = sched->Submit(std::move(api.gen));
    if (!handle.ok()) {
      SendError(res, FromStatus(handle.status()));
      return;
    }
    auto call = std::make_shared<Call>();
    call->endpoint = ep;
    call->handle = *handle;
    call->id = NewId(ep == Endpoint::kChat ? "chatcmpl-" : "cmpl-");
    call->created = static_cast<int64_t>(std::time(nullptr));
    call->model = model_.id;
    call->logprobs = api.logprobs;
    call->include_usage = api.include_usage;
    call->token_ids = api.return_token_ids;
    call->metrics = &metrics_;
    call->tokenizer = model_.tokenizer;
    if (api.parse_tool_calls) {
      call->tool_parser = std::make_unique<ToolCallParser>(model_.tool_format, api.tool_names);
    }

    if (!api.stream) {
      RequestDelta d;
      while (true) {
        d = call->handle->Take(std::chrono::milliseconds(1000));
        call->Observe(d.tokens);
        call->text += d.text;
        call->tokens.insert(call->tokens.end(), d.tokens.begin(), d.tokens.end());
        if (d.finished) break;
      }
      if (d.finish_reason == "error") {
        SendError(res, FromStatus(d.error));
        return;
      }
      metrics_.AddTokens(d.usage.prompt_tokens, d.usage.cached_tokens, d.usage.completion_tokens);
      metrics_.ObserveDuration(
          std::chrono::duration<double>(Clock::now() - call->handle->submitted()).count());
      nlohmann::json out = call->Envelope(false);
      std::vector<ToolCall> calls;
      std::string content = call->Content(call->text);
      content += call->EndContent(&calls, d.finish_reason == "length");
      nlohmann::json choice =
          call->Choice(content, call->tokens, false,
                       calls.empty() || d.finish_reason == "length" ? d.finish_reason : "tool_calls");
      if (!calls.empty()) {
        choice["message"]["tool_calls"] = ToolCallsJson(calls, false);
        if (content.empty()) choice["message"]["content"] = nullptr;
      }
      out["choices"] = nlohmann::json::array({choice});
      out["usage"] = UsageJson(d.usage);
      SendJson(res, 200, out);
      return;
    }

    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [call](size_t, httplib::DataSink& sink) {
          auto write = [&](const nlohmann::json& j) {
            const std::string ev = SseEvent(j);
            return sink.write(ev.data(), ev.size());
          };
          auto gone = [&] {
            call->handle->Cancel();
            call->metrics->CountDisconnect();
            return false;
          };
          if (call->endpoint == Endpoint::kChat) {
            nlohmann::json first = call->Envelope(true);
            nlohmann::json c = {{"index", 0},
                                {"delta", {{"role", "assistant"}, {"content", ""}}},
                                {"logprobs", nullptr},
                                {"finish_reason", nullptr}};
            first["choices"] = nlohmann::json::array({c});
            if (!write(first)) return gone();
          }
          while (true) {
            RequestDelta d = call->handle->Take(std::chrono::milliseconds(50));
            call->Observe(d.tokens);
            const std::string content = call->Content(d.text);
            if (!content.empty() || !d.tokens.empty()) {
              nlohmann::json chunk = call->Envelope(true);
              chunk["choices"] = nlohmann::json::array({call->Choice(content, d.tokens, true, "")});
              for (const auto& t : d.tokens) {
                auto b = call->tokenizer->TokenBytes(t.id);
                call->text_offset += b.ok() ? static_cast<int64_t>(b->size()) : 0;
              }
              if (!write(chunk)) return gone();
            } else if (!d.finished && !sink.is_writable()) {
              return gone();
            }
            if (!d.finished) continue;
            if (d.finish_reason == "error") {
              const ApiError e = FromStatus(d.error);
              if (!write(ErrorBody(e))) return gone();
            } else if (d.finish_reason != "cancelled") {
              call->metrics->AddTokens(d.usage.prompt_tokens, d.usage.cached_tokens,
                                       d.usage.completion_tokens);
              call->metrics->ObserveDuration(
                  std::chrono::duration<double>(Clock::now() - call->handle->submitted()).count());
              std::vector<ToolCall> calls;
              const std::string rest = call->EndContent(&calls, d.finish_reason == "length");
              if (!rest.empty()) {
                nlohmann::json chunk = call->Envelope(true);
                chunk["choices"] = nlohmann::json::array({call->Choice(rest, {}, true, "")});
                if (!write(chunk)) return gone();
              }
              const nlohmann::json tc = ToolCallsJson(calls, true);
              for (const auto& one : tc) {
                nlohmann::json chunk = call->Envelope(true);
                nlohmann::json c = {{"index", 0},
                                    {"delta", {{"tool_calls", nlohmann::json::array({one})}}},
                                    {"logprobs", nullptr},
                                    {"finish_reason", nullptr}};
                chunk["choices"] = nlohmann::json::array({c});
                if (!write(chunk)) return gone();
              }
              nlohmann::json last = call->Envelope(true);
              last["choices"] = nlohmann::json::array({call->Choice(
                  "", {}, true,
                  calls.empty() || d.finish_reason == "length" ? d.finish_reason : "tool_calls")});
              if (!write(last)) return gone();
              if (call->include_usage) {
                nlohmann::json u = call->Envelope(true);
                u["choices"] = nlohmann::json::array();
                u["usage"] = UsageJson(d.usage);
                if (!write(u)) return gone();
              }
            }
            const std::string done = "data: [DONE]\n\n";
            if (!sink.write(done.data(), done.size())) return gone();
            sink.done();
            return true;
          }
        },
        [call](bool success) {
          if (!success) call->handle->Cancel();
        });
  };
  s.Post("/v1/chat/completions", [completion](const httplib::Request& req, httplib::Response& res) {
    completion(Endpoint::kChat, req, res);
  });
  s.Post("/v1/completions", [completion](const httplib::Request& req, httplib::Response& res) {
    completion(Endpoint::kCompletions, req, res);
  });
}

}  // namespace fak::server
