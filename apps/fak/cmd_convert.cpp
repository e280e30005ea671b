// fak synth and fak quantize: the model writers (engine/convert). Both print one summary line.
#include <cstdlib>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "apps/fak/commands.h"
#include "core/progress.h"
#include "engine/convert/model_plan.h"
#include "engine/convert/quant_mix.h"
#include "engine/convert/quantize.h"
#include "engine/convert/synth.h"

namespace fak::cli {
namespace {

// Where the Qwen tokenizer is looked for when --tokenizer is not given.
std::string DefaultTokenizer() {
  if (const char* env = std::getenv("FAK_SYNTH_TOKENIZER"); env != nullptr && *env != '\0') return env;
  for (const char* dir : {"shared/fixtures/tokenizers/qwen3", "../shared/fixtures/tokenizers/qwen3"}) {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json", ec)) return dir;
  }
  return "";
}

void PrintReport(const std::string& path, const convert::ConvertReport& r) {
  fmt::print("wrote {}: {} tensors, {:.3f} B parameters, {:.2f} GiB in {:.1f} s\n", path, r.tensors,
             static_cast<double>(r.parameters) * 1e-9, static_cast<double>(r.file_bytes) / (1ull << 30),
             r.seconds);
}

// A progress bar over tensors, drawn on a terminal only.
convert::TensorProgress BarProgress(std::shared_ptr<ProgressBar>& bar, const std::string& label) {
  return [&bar, label](size_t i, size_t n, const std::string&) {
    if (!bar) bar = std::make_shared<ProgressBar>(label, n);
    bar->Update(i);
  };
}

}  // namespace

void RegisterSynth(CLI::App& app, Context& ctx) {
  auto* cmd =
      app.add_subcommand("synth", "Write a random-weight model at a real geometry with a real tokenizer");
  static convert::SynthOptions o;
  static std::string type = "q8_0";
  cmd->add_option("--geometry,-g", o.geometry, "One of: " + convert::GeometryNames())->required();
  cmd->add_option("--arch", o.arch, "llama, qwen2 or qwen3 (default: the geometry's)");
  cmd->add_option("--type,-t", type, "One of: " + convert::FileTypeNames())->capture_default_str();
  cmd->add_option("--output,-o", o.output, "Output .gguf file")->required();
  cmd->add_option("--seed", o.seed, "Seed of the weights")->capture_default_str();
  cmd->add_option("--tokenizer", o.tokenizer,
                  "Qwen2 tokenizer.json or its folder (default: $FAK_SYNTH_TOKENIZER, else "
                  "shared/fixtures/tokenizers/qwen3 under . or ..)");
  cmd->add_option("--threads", o.threads, "Threads (default: all CPUs)");
  cmd->callback([&ctx]() {
    o.type = type;
    if (o.tokenizer.empty()) o.tokenizer = DefaultTokenizer();
    if (o.tokenizer.empty()) {
      ctx.exit_code = Fail(
          "no tokenizer found: pass --tokenizer (a Qwen2 tokenizer.json or its folder) or set "
          "FAK_SYNTH_TOKENIZER");
      return;
    }
    std::shared_ptr<ProgressBar> bar;
    o.progress = BarProgress(bar, "synth");
    auto r = convert::Synthesize(o);
    if (bar) bar->Finish();
    if (!r.ok()) {
      ctx.exit_code = Fail(r.status().ToString());
      return;
    }
    PrintReport(o.output, *r);
  });
}

void RegisterQuantize(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("quantize",
                                 "Convert a GGUF file or a HuggingFace checkpoint folder to GGUF of TYPE");
  static convert::QuantizeOptions o;
  cmd->add_option("input", o.input, "GGUF file, or folder with config.json, *.safetensors and tokenizer.json")
      ->required();
  cmd->add_option("output", o.output, "Output .gguf file")->required();
  cmd->add_option("type", o.type, "One of: " + convert::FileTypeNames())->required();
  cmd->add_option("--threads", o.threads, "Threads (default: all CPUs)");
  cmd->add_option(
      "--tokenizer", o.tokenizer,
      "Tokenizer to write instead of the input's (.gguf, tokenizer.json, tokenizer.model or folder)");
  cmd->callback([&ctx]() {
    std::shared_ptr<ProgressBar> bar;
    o.progress = BarProgress(bar, "quantize");
    auto r = convert::QuantizeModel(o);
    if (bar) bar->Finish();
    if (!r.ok()) {
      ctx.exit_code = Fail(r.status().ToString());
      return;
    }
    PrintReport(o.output, *r);
  });
}

}  // namespace fak::cli
