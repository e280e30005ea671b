// Each `fak` subcommand registers itself on the CLI11 app; its callback stores the exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace fak::cli {

struct Context {
  int exit_code = 0;
};

void RegisterInspect(CLI::App& app, Context& ctx);
void RegisterTokenize(CLI::App& app, Context& ctx);
void RegisterTemplate(CLI::App& app, Context& ctx);
void RegisterRun(CLI::App& app, Context& ctx);
void RegisterChat(CLI::App& app, Context& ctx);
void RegisterServe(CLI::App& app, Context& ctx);
void RegisterBench(CLI::App& app, Context& ctx);
void RegisterSynth(CLI::App& app, Context& ctx);
void RegisterQuantize(CLI::App& app, Context& ctx);
void RegisterPerplexity(CLI::App& app, Context& ctx);

// Prints "fak: <message>" on stderr and returns exit code 1 (the CLI's way of reporting a Status).
int Fail(const std::string& message);
// Prints "fak: <message>" and a pointer to --help on stderr and returns exit code 2: the command line
// itself is wrong (a flag value out of range, flags that contradict each other).
int UsageError(const std::string& message);

}  // namespace fak::cli
