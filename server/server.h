// `fak serve`'s HTTP side: the OpenAI-compatible endpoints over one Scheduler, on cpp-httplib.
//
//   POST /v1/chat/completions, POST /v1/completions   (stream or not; SSE ends with data: [DONE])
//   GET  /v1/models, GET /health (503 until the model is loaded), GET /metrics (Prometheus text)
//   DELETE /v1/cache                                   drops the unpinned prefix-cache entries
//
// With API keys, every endpoint but /health wants "Authorization: Bearer KEY". Bodies are capped;
// a streaming request whose client goes away is cancelled at once and its pages freed.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/scheduler.h"
#include "server/metrics.h"
#include "server/openai.h"

namespace httplib {
class Server;
}

namespace fak::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see Server::port)
  std::vector<std::string> api_keys;
  size_t max_body_bytes = 4u << 20;
  int http_threads = 64;           // connections served at once (a stream holds one for its length)
  int write_timeout_seconds = 10;  // a client that stops reading is dropped after this long
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the socket; afterwards port() is the port bound.
  Status Bind();
  int port() const { return port_; }
  // Serves until Stop(); /health answers 503 until Ready.
  void Serve();
  void Stop();
  // The model is loaded: requests go to `scheduler`.
  void Ready(Scheduler* scheduler, ModelInfo model);

 private:
  void Routes();

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  int listen_fd_ = -1;  // the listening socket, once created
  std::atomic<Scheduler*> scheduler_{nullptr};
  ModelInfo model_;
  Metrics metrics_;
  int64_t created_ = 0;
};

}  // namespace fak::server
