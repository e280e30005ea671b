// fak chat: a multi-turn conversation through the model's chat template, reading stdin line by line
// and reusing the cached prefix between turns. Lines starting with '/' are commands (/help lists
// them). When the conversation outgrows the context, the oldest turns are dropped (and said so); a
// single message too long for the context is refused and the conversation kept. Ctrl-C stops the
// reply being generated; at the prompt it ends the program.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/fak/commands.h"
#include "apps/fak/model_flags.h"
#include "core/mapped_file.h"  // ReadFileToString
#include "engine/generate.h"
#include "engine/session.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/chat_template_loader.h"

namespace fak::cli {
namespace {

using ojson = nlohmann::ordered_json;

volatile std::sig_atomic_t g_interrupted = 0;

void OnInterrupt(int) { g_interrupted = 1; }

// SIGINT without SA_RESTART: a read waiting at the prompt returns with EINTR (the loop then ends),
// while generation polls the flag between tokens.
void InstallInterruptHandler() {
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

// Templates for models that ship none (or a wrong one), by name.
constexpr const char* kChatMl =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
constexpr const char* kLlama3 =
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if "
    "add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

// --chat-template: a file holding a Jinja template, a built-in name (chatml, llama3), or the name of
// one of the model's own templates; empty: the model's default template.
Result<ModelChatTemplate> PickChatTemplate(const std::string& choice, const std::string& model_path,
                                           const Tokenizer& tok) {
  auto token_text = [&tok](int32_t id) { return id >= 0 && id < tok.vocab_size() ? tok.TokenText(id) : ""; };
  ModelChatTemplate builtin{
      .source = "", .bos_token = token_text(tok.bos_id()), .eos_token = token_text(tok.eos_id())};
  std::error_code ec;
  if (!choice.empty() && std::filesystem::is_regular_file(choice, ec)) {
    FAK_ASSIGN_OR_RETURN(builtin.source, ReadFileToString(choice));
    return builtin;
  }
  if (choice == "chatml" || choice == "llama3") {
    builtin.source = choice == "chatml" ? kChatMl : kLlama3;
    return builtin;
  }
  auto m = LoadModelChatTemplate(model_path, choice);
  if (!m.ok() && choice.empty()) {
    return m.status().WithContext(
        "the model has no usable chat template; give one with --chat-template "
        "FILE or a built-in name (chatml, llama3)");
  }
  if (!m.ok())
    return m.status().WithContext("--chat-template " + choice + " (not a file, not chatml or llama3)");
  return m;
}

constexpr const char* kHelp =
    "commands:\n"
    "  /help          this list\n"
    "  /clear         start a new conversation (the system message stays)\n"
    "  /save FILE     write the conversation as a JSON array of messages\n"
    "  /load FILE     continue a conversation saved with /save\n"
    "  /quit, /exit   end (so do end of input and Ctrl-C at the prompt)\n"
    "  //TEXT         send TEXT starting with '/'\n"
    "Ctrl-C while a reply is being written stops that reply.\n";

// A JSON array of {role, content} messages with string fields, as /save writes it.
Result<ojson> ReadConversation(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(ojson j, ReadJsonFile(path));
  if (!j.is_array()) return Corrupt("{}: want a JSON array of messages", path);
  for (size_t i = 0; i < j.size(); ++i) {
    const ojson& m = j[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      return Corrupt("{}: message {} is not an object with string 'role' and 'content'", path, i);
    }
  }
  return j;
}

Status WriteConversation(const std::string& path, const ojson& messages) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return IoError("{}: cannot create", tmp);
    out << messages.dump(2) << "\n";
    if (!out.flush()) return IoError("{}: write failed", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return IoError("{}: cannot write: {}", path, ec.message());
  }
  return Status::Ok();
}

struct Chat {
  const ChatTemplate& tmpl;
  const ModelChatTemplate& mt;
  const Tokenizer& tok;
  Session& session;
  int64_t reserve;  // positions kept free for the reply
  ojson messages = ojson::array();

  bool HasSystem() const { return !messages.empty() && messages[0]["role"] == "system"; }

  Result<std::vector<int32_t>> Prompt() const {
    FAK_ASSIGN_OR_RETURN(std::string text,
                         RenderChat(tmpl, messages, nullptr, true, mt.bos_token, mt.eos_token));
    return tok.Encode(text, EncodeOptions{.add_special = false, .parse_special = true});
  }

  // A dropped message as the user is told of it: its role and the start of its text.
  static std::string Describe(const ojson& m) {
    std::string text =
        m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
    for (char& c : text) {
      if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    }
    if (text.size() > 40) {
      size_t cut = 40;
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // whole characters
      text = text.substr(0, cut) + "...";
    }
    return fmt::format("{} \"{}\"", m.value("role", std::string("?")), text);
  }

  // Drops the oldest turns (a user message with the reply that follows it; never the system message or
  // the newest message) until the prompt and the reply's reserve fit the context, and says which.
  // Returns the prompt, or an error when even the newest message alone does not fit, in which case that
  // message is taken back.
  Result<std::vector<int32_t>> Fit() {
    const int64_t ctx = session.max_context();
    size_t dropped = 0;
    std::string which;
    while (true) {
      auto ids = Prompt();
      if (!ids.ok()) {
        messages.erase(messages.end() - 1);
        return ids.status();
      }
      const int64_t need = static_cast<int64_t>(ids->size()) + reserve;
      if (need <= ctx) {
        if (dropped > 0) {
          std::fprintf(stderr,
                       "fak: dropped the %zu oldest message%s to fit the context of %lld tokens: %s\n",
                       dropped, dropped == 1 ? "" : "s", static_cast<long long>(ctx), which.c_str());
        }
        return ids;
      }
      const size_t first = HasSystem() ? 1 : 0;
      if (messages.size() - first <= 1) {
        messages.erase(messages.end() - 1);
        return InvalidArgument(
            "message not sent: {} prompt tokens and {} kept for the reply exceed the context of {} (-c)",
            ids->size(), reserve, ctx);
      }
      // The oldest message goes, and with it a reply it leaves at the front (templates expect a
      // conversation to start with the user).
      do {
        which += (which.empty() ? "" : ", ") + Describe(messages[first]);
        messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(first));
        ++dropped;
      } while (messages.size() - first > 1 && messages[first]["role"] == "assistant");
    }
  }
};

}  // namespace

void RegisterChat(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("chat", "Chat with a model through its chat template (reads stdin; /help)");
  static ModelFlags mf;
  static SamplingFlags sf;
  static std::string system, template_choice;
  static int64_t n_predict = 512;
  static bool no_stats = false;
  mf.Add(cmd);
  sf.Add(cmd);
  cmd->add_option("-s,--system", system, "System message");
  cmd->add_option("-n,--n-predict", n_predict,
                  "Most tokens per reply (at most half the context is kept for it)");
  cmd->add_option("--chat-template", template_choice,
                  "Template file, a built-in name (chatml, llama3) or one of the model's named templates");
  cmd->add_flag("--no-stats", no_stats, "Do not print the timing line after each reply");
  cmd->callback([&ctx]() {
    if (n_predict < 1) {
      ctx.exit_code = UsageError(fmt::format("chat: -n {}: want at least 1", n_predict));
      return;
    }
    if (Status s = sf.Resolve(); !s.ok()) {
      ctx.exit_code = UsageError(s.message());
      return;
    }
    auto loaded = LoadForRun(mf);
    if (!loaded.ok()) {
      ctx.exit_code = Fail(loaded.status().ToString());
      return;
    }
    if (Status s = sf.CheckVocabulary(loaded->model->config.vocab_size); !s.ok()) {
      ctx.exit_code = UsageError(s.message());
      return;
    }
    const std::string tpath = mf.tokenizer.empty() ? loaded->model->source->tokenizer_path() : mf.tokenizer;
    auto mt = PickChatTemplate(template_choice, tpath, *loaded->tokenizer);
    if (!mt.ok()) {
      ctx.exit_code = Fail(mt.status().ToString());
      return;
    }
    auto tmpl = ChatTemplate::Parse(mt->source);
    if (!tmpl.ok()) {
      ctx.exit_code = Fail(tmpl.status().ToString());
      return;
    }
    auto session = CreateSession(mf, *loaded);
    if (!session.ok()) {
      ctx.exit_code = Fail(session.status().ToString());
      return;
    }
    Chat chat{*tmpl, *mt, *loaded->tokenizer, **session, std::min(n_predict, (*session)->max_context() / 2)};
    if (!system.empty()) chat.messages.push_back({{"role", "system"}, {"content", system}});
    InstallInterruptHandler();
    const bool tty = isatty(0) == 1;
    std::string line;
    while (true) {
      if (tty) std::fputs("> ", stdout), std::fflush(stdout);
      g_interrupted = 0;
      if (!std::getline(std::cin, line)) break;  // end of input, or Ctrl-C at the prompt
      if (line.empty()) continue;
      if (line[0] == '/' && line.rfind("//", 0) != 0) {
        const size_t sp = line.find(' ');
        const std::string word = line.substr(0, sp);
        std::string arg = sp == std::string::npos ? "" : line.substr(sp + 1);
        arg.erase(0, arg.find_first_not_of(' '));
        if (word == "/quit" || word == "/exit") break;
        if (word == "/help") {
          std::fputs(kHelp, stdout);
        } else if (word == "/clear") {
          chat.messages.erase(chat.messages.begin() + (chat.HasSystem() ? 1 : 0), chat.messages.end());
          std::fputs("fak: conversation cleared\n", stderr);
        } else if (word == "/save" || word == "/load") {
          if (arg.empty()) {
            std::fprintf(stderr, "fak: %s needs a file name\n", word.c_str());
            continue;
          }
          if (word == "/save") {
            Status s = WriteConversation(arg, chat.messages);
            if (s.ok()) {
              std::fprintf(stderr, "fak: saved %zu messages to %s\n", chat.messages.size(), arg.c_str());
            } else {
              std::fprintf(stderr, "fak: %s\n", s.ToString().c_str());
            }
          } else {
            auto loaded_messages = ReadConversation(arg);
            if (!loaded_messages.ok()) {
              std::fprintf(stderr, "fak: %s (conversation unchanged)\n",
                           loaded_messages.status().ToString().c_str());
              continue;
            }
            chat.messages = std::move(*loaded_messages);
            std::fprintf(stderr, "fak: loaded %zu messages from %s\n", chat.messages.size(), arg.c_str());
          }
        } else {
          std::fprintf(stderr, "fak: unknown command %s (/help lists them)\n", word.c_str());
        }
        continue;
      }
      if (line.rfind("//", 0) == 0) line.erase(0, 1);
      chat.messages.push_back({{"role", "user"}, {"content", line}});
      auto ids = chat.Fit();
      if (!ids.ok()) {
        std::fprintf(stderr, "fak: %s\n", ids.status().message().c_str());
        continue;
      }
      GenerateOptions go;
      go.max_tokens = chat.reserve;
      go.sampling = sf.p;
      go.on_text = [](const std::string& text) {
        if (g_interrupted) return false;
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return true;
      };
      auto r = GenerateFromIds(**session, *loaded->tokenizer, *ids, go);
      if (!r.ok()) {
        ctx.exit_code = Fail(r.status().ToString());
        return;
      }
      std::fputc('\n', stdout);
      if (r->stop_reason == "callback") std::fputs("fak: reply stopped (Ctrl-C)\n", stderr);
      if (!no_stats) PrintTimings(*r);
      chat.messages.push_back({{"role", "assistant"}, {"content", r->text}});
    }
  });
}

}  // namespace fak::cli
