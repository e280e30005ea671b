// A stand-in for llama-server in the tests: answers /health and a streaming /completion on the given
// loopback port the way llama-server does, with deterministic tokens (prompt[i] + 1), or misbehaves
// as --mode asks: garbage (an event that is not JSON), short (one token too few), crash (exits on
// the first completion), drop (an error event after 3 tokens of every request for a prompt of the
// original length, as llama-server does when its output parser rejects the text).
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  int port = 0;
  std::string mode = "ok";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--version") {
      std::fprintf(stderr, "version: 1 (fake)\nbuilt with a test\n");
      return 0;
    }
    if (a == "--port" && i + 1 < argc) port = std::atoi(argv[++i]);
    if (a == "--mode" && i + 1 < argc) mode = argv[++i];
  }
  if (port <= 0) {
    std::fprintf(stderr, "error: --port missing\n");
    return 2;
  }
  httplib::Server svr;
  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  svr.Post("/completion", [mode](const httplib::Request& req, httplib::Response& res) {
    auto body = nlohmann::json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.contains("prompt") || !body["prompt"].is_array()) {
      res.status = 400;
      res.set_content("{\"error\":\"bad request\"}", "application/json");
      return;
    }
    if (mode == "crash") {
      std::fprintf(stderr, "GGML_ASSERT: fake failure\n");
      std::_Exit(134);
    }
    const std::vector<int> prompt = body["prompt"].get<std::vector<int>>();
    const int n = body.value("n_predict", 16) - (mode == "short" ? 1 : 0);
    const bool drop = mode == "drop" && prompt.size() == 16;
    res.set_chunked_content_provider("text/event-stream", [prompt, n, mode, drop](size_t,
                                                                                  httplib::DataSink& sink) {
      for (int i = 0; i < n; ++i) {
        if (drop && i == 3) {
          const std::string err = "data: {\"error\":{\"code\":500,\"message\":\"output parser failed\"}}\n\n";
          sink.write(err.data(), err.size());
          sink.done();
          return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(i == 0 ? 5 : 1));
        const int tok = prompt[static_cast<size_t>(i) % prompt.size()] + 1;
        std::string ev =
            mode == "garbage" && i == 2
                ? "data: {\"content\": <<garbage\n\n"
                : "data: " + nlohmann::json({{"content", "x"}, {"tokens", {tok}}, {"stop", false}}).dump() +
                      "\n\n";
        sink.write(ev.data(), ev.size());
      }
      const nlohmann::json fin = {
          {"content", ""},
          {"tokens", nlohmann::json::array()},
          {"stop", true},
          {"timings", {{"prompt_n", prompt.size()}, {"prompt_ms", 2.5}, {"predicted_n", n}}}};
      const std::string ev = "data: " + fin.dump() + "\n\n";
      sink.write(ev.data(), ev.size());
      sink.done();
      return true;
    });
  });
  std::fprintf(stderr, "fake llama-server listening on 127.0.0.1:%d (mode %s)\n", port, mode.c_str());
  return svr.listen("127.0.0.1", port) ? 0 : 1;
}
