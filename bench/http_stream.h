// A plain HTTP/1.1 client for loopback benchmarks and tests: one request per connection
// ("Connection: close"), the response body handed over as it arrives (chunked transfer decoded),
// under a deadline. It carries no logic of its own beyond the protocol, so a streaming measurement
// times the server and not a client library's buffering.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace fak::bench {

struct HttpReply {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;  // the whole body, when no sink was given
};

// Returns false to stop reading (the connection is closed).
using BodySink = std::function<bool(std::string_view)>;

// `method` `path` on 127.0.0.1:`port` with a JSON body (empty: none). An error when the connection,
// the deadline or the framing fails; a status other than 200 is data, not an error.
Result<HttpReply> LoopbackRequest(int port, const std::string& method, const std::string& path,
                                  const std::string& body, double timeout_seconds, const BodySink& sink = {});

// Splits a server-sent-event stream into the payloads of its "data:" lines (an "error:" line, as
// llama-server writes it, becomes {"error": ...}).
class SseParser {
 public:
  template <typename F>
  void Feed(std::string_view data, F&& on_event) {
    buf_.append(data);
    for (size_t end; (end = buf_.find("\n\n")) != std::string::npos;) {
      std::string payload = Payload(std::string_view(buf_).substr(0, end));
      buf_.erase(0, end + 2);
      if (!payload.empty()) on_event(payload);
    }
  }

 private:
  static std::string Payload(std::string_view event);
  std::string buf_;
};

}  // namespace fak::bench
