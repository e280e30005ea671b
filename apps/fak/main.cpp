// fak: a local LLM inference engine. This file only assembles the subcommands.
#include <cctype>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "apps/fak/commands.h"
#include "apps/fak/version.h"

namespace fak::cli {

int Fail(const std::string& message) {
  std::fprintf(stderr, "fak: %s\n", message.c_str());
  return 1;
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "fak: %s\nRun with --help for more information.\n", message.c_str());
  return 2;
}

namespace {

// CLI11 reads "-ngl 99" as "-n" with the value "gl": a llama.cpp user's multi-letter single-dash flag
// would fail as "Could not convert". Such a word, unless it is one of the subcommand's own names or the
// value of the option before it, is reported as the unknown option it is.
std::string UnknownDashWord(const CLI::App& app, int argc, char** argv) {
  const CLI::App* sub = nullptr;
  const CLI::Option* prev = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (sub == nullptr) {
      if (a.empty() || a[0] == '-') continue;
      for (const CLI::App* s : app.get_subcommands([&a](const CLI::App* c) { return c->get_name() == a; }))
        sub = s;
      continue;
    }
    const bool takes_value = prev != nullptr && prev->get_expected_min() > 0;
    const bool dash_word = a.size() > 2 && a[0] == '-' && std::isalpha(static_cast<unsigned char>(a[1])) &&
                           std::isalpha(static_cast<unsigned char>(a[2]));
    if (dash_word && !takes_value && sub->get_option_no_throw(a) == nullptr) return a;
    prev = a.size() > 1 && a[0] == '-' && a.find('=') == std::string::npos ? sub->get_option_no_throw(a)
                                                                           : nullptr;
  }
  return "";
}

}  // namespace

}  // namespace fak::cli

int main(int argc, char** argv) {
  CLI::App app{"fak: local LLM inference for fleets of agents"};
  app.require_subcommand(0, 1);
  app.option_defaults()->always_capture_default();  // --help shows every default
  bool version = false;
  app.add_flag("--version", version, "Print version, git commit and compiled backends");
  fak::cli::Context ctx;
  fak::cli::RegisterInspect(app, ctx);
  fak::cli::RegisterTokenize(app, ctx);
  fak::cli::RegisterTemplate(app, ctx);
  fak::cli::RegisterRun(app, ctx);
  fak::cli::RegisterChat(app, ctx);
  fak::cli::RegisterServe(app, ctx);
  fak::cli::RegisterBench(app, ctx);
  fak::cli::RegisterSynth(app, ctx);
  fak::cli::RegisterQuantize(app, ctx);
  fak::cli::RegisterPerplexity(app, ctx);
  // Exit codes: 0 done, 1 a runtime error (bad file, failed load), 2 a command-line error.
  if (const std::string bad = fak::cli::UnknownDashWord(app, argc, argv); !bad.empty()) {
    std::fprintf(stderr, "fak: unknown option %s\nRun with --help for more information.\n", bad.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (version) {
    std::fputs(fak::cli::VersionText().c_str(), stdout);
    return 0;
  }
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  return ctx.exit_code;
}
