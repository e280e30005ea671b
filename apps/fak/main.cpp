// fak: a local LLM inference engine. This file only assembles the subcommands.
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

}  // namespace fak::cli

int main(int argc, char** argv) {
  CLI::App app{"fak: local LLM inference for fleets of agents"};
  app.require_subcommand(0, 1);
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
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
