// fak serve: the OpenAI-compatible server (server/server.h) over one model and one scheduler.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "apps/fak/commands.h"
#include "apps/fak/model_flags.h"
#include "core/mapped_file.h"  // ReadFileToString
#include "engine/scheduler.h"
#include "server/server.h"
#include "tokenizer/chat_template_loader.h"

namespace fak::cli {
namespace {

struct ServeFlags {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> api_keys;
  int64_t parallel = 8;
  double kv_budget_mib = 0;  // 0: parallel sequences of the full context
  int64_t queue = 64;
  int64_t step_tokens = 256;
  bool step_tokens_given = false;  // else 256 beside the CPU backend, 512 beside a GPU (docs/bench/gpu.md)
  double max_body_mib = 4;
  std::vector<std::string> pin_prefix;
  std::string alias;
  bool no_prefix_cache = false;
  int http_threads = 0;
  int write_timeout = 10;
  int64_t page_tokens = 16;
};

// The pinned preamble: the file's text as the system message, rendered alone by the template.
Result<std::vector<int32_t>> PreambleTokens(const std::string& path, const server::ModelInfo& m) {
  auto read = ReadFileToString(path);
  if (!read.ok()) return read.status().WithContext("--pin-prefix");
  const std::string text = std::move(*read);
  std::string rendered = text;
  if (m.chat_template != nullptr) {
    nlohmann::ordered_json messages =
        nlohmann::ordered_json::array({{{"role", "system"}, {"content", text}}});
    FAK_ASSIGN_OR_RETURN(rendered, RenderChat(*m.chat_template, messages, nullptr, false,
                                              m.template_meta.bos_token, m.template_meta.eos_token));
  }
  FAK_ASSIGN_OR_RETURN(auto ids,
                       m.tokenizer->Encode(rendered, EncodeOptions{.add_special = m.chat_template == nullptr,
                                                                   .parse_special = true}));
  if (ids.empty()) return InvalidArgument("--pin-prefix {}: the preamble is empty", path);
  return ids;
}

int Serve(const ModelFlags& mf, const ServeFlags& sf) {
  if (sf.parallel < 1) return Fail("--parallel must be at least 1");
  if (sf.queue < 0) return Fail("--queue must not be negative");
  if (sf.step_tokens < 1) return Fail("--step-tokens must be at least 1");
  if (sf.port < 0 || sf.port > 65535) return Fail(fmt::format("--port {} is not a port number", sf.port));
  if (sf.max_body_mib <= 0) return Fail("--max-body must be positive");
  if (sf.kv_budget_mib < 0) return Fail("--kv-budget must not be negative");
  // Signals go to the thread that waits for them, not to the server's threads.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  server::ServerOptions so;
  so.host = sf.host;
  so.port = sf.port;
  so.api_keys = sf.api_keys;
  if (const char* k = std::getenv("FAK_API_KEY"); k != nullptr && *k != '\0') so.api_keys.push_back(k);
  so.max_body_bytes = static_cast<size_t>(sf.max_body_mib * 1024 * 1024);
  so.http_threads = sf.http_threads > 0
                        ? sf.http_threads
                        : static_cast<int>(std::max<int64_t>(64, sf.parallel + sf.queue + 16));
  so.write_timeout_seconds = sf.write_timeout;
  server::Server http(so);
  Status s = http.Bind();
  if (!s.ok()) return Fail(s.ToString());
  std::printf("fak serve: listening on http://%s:%d (loading %s)\n", sf.host.c_str(), http.port(),
              std::filesystem::path(mf.model).filename().string().c_str());
  std::fflush(stdout);
  std::thread http_thread([&] { http.Serve(); });
  auto stop = [&](int code) {
    http.Stop();
    http_thread.join();
    return code;
  };

  auto loaded = LoadForRun(mf);
  if (!loaded.ok()) return stop(Fail(loaded.status().ToString()));
  const ModelConfig& c = loaded->model->config;
  auto ro = RuntimeOptionsFor(mf, *loaded->model);
  if (!ro.ok()) return stop(Fail(ro.status().ToString()));
  ro->max_sequences = sf.parallel;
  ro->page_tokens = sf.page_tokens;
  if (sf.kv_budget_mib > 0) {
    const double page_bytes = static_cast<double>(c.n_layer * 2 * c.n_kv_head * c.head_dim * sf.page_tokens) *
                              (ro->kv_f32 ? 4.0 : 2.0);
    ro->kv_pages = static_cast<int64_t>(sf.kv_budget_mib * 1024 * 1024 / page_bytes);
    if (ro->kv_pages < 1)
      return stop(Fail(
          fmt::format("--kv-budget {} MiB holds no KV page ({} bytes each)", sf.kv_budget_mib, page_bytes)));
  }
  auto rt = Runtime::Create(*loaded->model, *ro, loaded->backend.get());
  if (!rt.ok()) return stop(Fail(rt.status().ToString()));

  server::ModelInfo info;
  info.id = !sf.alias.empty() ? sf.alias : std::filesystem::path(mf.model).stem().string();
  if (info.id.empty()) info.id = std::filesystem::path(mf.model).parent_path().filename().string();
  info.tokenizer = loaded->tokenizer.get();
  info.context = (*rt)->max_context();
  std::unique_ptr<ChatTemplate> tmpl;
  const std::string tpath = mf.tokenizer.empty() ? loaded->model->source->tokenizer_path() : mf.tokenizer;
  if (auto mt = LoadModelChatTemplate(tpath); mt.ok()) {
    auto t = ChatTemplate::Parse(mt->source);
    if (!t.ok()) return stop(Fail("the model's chat template: " + t.status().ToString()));
    tmpl = std::make_unique<ChatTemplate>(std::move(*t));
    info.template_meta = *mt;
    info.chat_template = tmpl.get();
    info.tool_format = server::DetectToolFormat(mt->source);
  } else {
    std::fprintf(stderr, "fak serve: %s; /v1/chat/completions is off\n", mt.status().ToString().c_str());
  }

  // Constrained output (response_format, tool calls): the vocabulary's byte trie, and grammars compiled
  // once per distinct schema.
  grammar::GrammarCache grammars(grammar::BuildTokenTrie(*loaded->tokenizer, c.eos_token_ids));
  info.grammars = &grammars;

  SchedulerOptions schedo;
  schedo.max_active = sf.parallel;
  schedo.max_queue = sf.queue;
  // A GPU runs a prompt step of 512 rows in about twice the time of 256 (1.5B Q8_0 on an H100: 16.4 ms),
  // and a burst of agents then waits for fewer steps: later agents' TTFT p50 27.3 against 35.4 ms, the
  // inter-token latency's p95 6.4 against 9.2 ms (fleet burst, 32 agents, 2,048-token preamble).
  schedo.step_tokens = sf.step_tokens_given ? sf.step_tokens : (*rt)->backend().name() == "cpu" ? 256 : 512;
  schedo.prefix_cache = !sf.no_prefix_cache;
  Scheduler sched(**rt, *loaded->tokenizer, c.eos_token_ids, schedo);
  for (const auto& p : sf.pin_prefix) {
    auto ids = PreambleTokens(p, info);
    if (!ids.ok()) return stop(Fail(ids.status().ToString()));
    if (s = sched.PinPrefix(*ids); !s.ok())
      return stop(Fail(fmt::format("--pin-prefix {}: {}", p, s.ToString())));
    std::printf("fak serve: pinned %zu tokens from %s\n", ids->size(), p.c_str());
  }
  const SchedulerStats st = sched.stats();
  http.Ready(&sched, info);
  std::printf(
      "fak serve: ready: model %s, context %lld, %lld sequences at once, KV pool %lld pages of %lld tokens\n",
      info.id.c_str(), static_cast<long long>(info.context), static_cast<long long>(sf.parallel),
      static_cast<long long>(st.kv_pages_total), static_cast<long long>(sf.page_tokens));
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::printf("fak serve: stopping (signal %d)\n", sig);
  std::fflush(stdout);
  http.Stop();
  http_thread.join();
  return 0;
}

}  // namespace

void RegisterServe(CLI::App& app, Context& ctx) {
  auto* cmd =
      app.add_subcommand("serve", "OpenAI-compatible server with continuous batching and a prefix cache");
  static ModelFlags mf;
  static ServeFlags sf;
  mf.Add(cmd);
  cmd->add_option("--host", sf.host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", sf.port, "Port (0: any free port, printed at start)");
  cmd->add_option("--api-key", sf.api_keys,
                  "Require \"Authorization: Bearer KEY\" (repeatable; also FAK_API_KEY)");
  cmd->add_option("--parallel,--np", sf.parallel, "Requests decoding at once");
  cmd->add_option(
      "--kv-budget", sf.kv_budget_mib,
      "KV cache memory in MiB, shared by requests and the prefix cache (default: --parallel full contexts)");
  cmd->add_option("--queue", sf.queue, "Requests waiting beyond --parallel before 503");
  static CLI::Option* step_tokens = cmd->add_option("--step-tokens", sf.step_tokens,
                                                    "Tokens per batch step (decode rows plus prefill chunks)")
                                        ->default_str("256 on the CPU, 512 on a GPU");
  cmd->add_option("--max-body", sf.max_body_mib, "Largest request body in MiB");
  cmd->add_option(
      "--pin-prefix", sf.pin_prefix,
      "A preamble file, rendered as a system message, computed at start and never evicted (repeatable)");
  cmd->add_option("--alias", sf.alias, "The model name clients use (default: the file name)");
  cmd->add_flag("--no-prefix-cache", sf.no_prefix_cache, "Compute every prompt in full");
  cmd->add_option("--http-threads", sf.http_threads, "Connections served at once");
  cmd->add_option("--write-timeout", sf.write_timeout,
                  "Seconds before a client that stops reading is dropped");
  cmd->add_option("--page-tokens", sf.page_tokens, "Positions per KV page");
  cmd->callback([&ctx]() {
    sf.step_tokens_given = step_tokens->count() > 0;
    ctx.exit_code = Serve(mf, sf);
  });
}

}  // namespace fak::cli
