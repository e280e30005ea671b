#include "bench/http_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/timer.h"

namespace fak::bench {
namespace {

class Socket {
 public:
  Socket() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Incremental decoder of a chunked body.
class Dechunker {
 public:
  // Appends the decoded bytes of `in` to `out`; false on a framing error.
  bool Feed(std::string_view in, std::string* out) {
    buf_.append(in);
    while (!done_) {
      if (left_ == 0) {
        const size_t eol = buf_.find("\r\n", pos_);
        if (eol == std::string::npos) break;
        const std::string size_line = buf_.substr(pos_, eol - pos_);
        char* end = nullptr;
        const unsigned long n = std::strtoul(size_line.c_str(), &end, 16);
        if (end == size_line.c_str()) return false;
        pos_ = eol + 2;
        if (n == 0) {
          done_ = true;
          break;
        }
        left_ = n + 2;  // the data and its CRLF
      }
      const size_t avail = std::min(left_, buf_.size() - pos_);
      if (avail == 0) break;
      const size_t data = left_ > 2 ? std::min(avail, left_ - 2) : 0;
      out->append(buf_, pos_, data);
      pos_ += avail;
      left_ -= avail;
    }
    if (pos_ > 4096) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    return true;
  }
  bool done() const { return done_; }

 private:
  std::string buf_;
  size_t pos_ = 0;
  size_t left_ = 0;
  bool done_ = false;
};

}  // namespace

std::string SseParser::Payload(std::string_view event) {
  std::string payload;
  for (size_t pos = 0; pos < event.size();) {
    size_t nl = event.find('\n', pos);
    if (nl == std::string_view::npos) nl = event.size();
    std::string_view line = event.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.rfind("data:", 0) == 0) {
      payload += line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
    } else if (line.rfind("error:", 0) == 0) {
      payload += "{\"error\":" + std::string(line.substr(6)) + "}";
    }
    pos = nl + 1;
  }
  return payload;
}

Result<HttpReply> LoopbackRequest(int port, const std::string& method, const std::string& path,
                                  const std::string& body, double timeout_seconds, const BodySink& sink) {
  const int64_t deadline = NowNanos() + static_cast<int64_t>(timeout_seconds * 1e9);
  Socket s;
  if (s.fd() < 0) return IoError("socket: {}", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    return IoError("connecting to 127.0.0.1:{}: {}", port, std::strerror(errno));
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!body.empty()) {
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n" + body;
  for (size_t sent = 0; sent < req.size();) {
    const ssize_t n = send(s.fd(), req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return IoError("sending {} {}: {}", method, path, std::strerror(errno));
    sent += static_cast<size_t>(n);
  }
  HttpReply reply;
  std::string head_buf;
  bool in_body = false, chunked = false;
  Dechunker dechunk;
  std::string decoded;
  char buf[16384];
  while (true) {
    const int64_t left_ms = (deadline - NowNanos()) / 1000000;
    if (left_ms <= 0)
      return IoError("{} {}: no complete answer within {:g} s", method, path, timeout_seconds);
    pollfd p{s.fd(), POLLIN, 0};
    const int pr = poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (pr < 0 && errno != EINTR) return IoError("poll: {}", std::strerror(errno));
    if (pr <= 0) continue;
    const ssize_t n = recv(s.fd(), buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("{} {}: reading the answer: {}", method, path, std::strerror(errno));
    }
    std::string_view got(buf, static_cast<size_t>(n));
    if (!in_body) {
      head_buf.append(got);
      const size_t end = head_buf.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (n == 0) return IoError("{} {}: the connection closed before the response headers", method, path);
        continue;
      }
      reply.head = head_buf.substr(0, end);
      if (reply.head.rfind("HTTP/1.", 0) != 0 || reply.head.size() < 12) {
        return Corrupt("{} {}: not an HTTP response", method, path);
      }
      reply.status = std::atoi(reply.head.c_str() + 9);
      std::string lower = reply.head;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      chunked = lower.find("transfer-encoding: chunked") != std::string::npos;
      in_body = true;
      got = std::string_view(head_buf).substr(end + 4);
    }
    std::string_view data = got;
    if (chunked) {
      decoded.clear();
      if (!dechunk.Feed(got, &decoded)) return Corrupt("{} {}: malformed chunked body", method, path);
      data = decoded;
    }
    if (!data.empty()) {
      if (sink) {
        if (!sink(data)) return reply;
      } else {
        reply.body.append(data);
      }
    }
    if ((chunked && dechunk.done()) || n == 0) break;
  }
  if (chunked && !dechunk.done())
    return IoError("{} {}: the stream ended before its last chunk", method, path);
  return reply;
}

}  // namespace fak::bench
