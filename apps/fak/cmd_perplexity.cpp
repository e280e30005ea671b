// fak perplexity: perplexity of a text over fixed-size chunks (llama-perplexity's method), and with a
// base model the KL divergence and top-1 agreement against it.
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/fak/commands.h"
#include "apps/fak/model_flags.h"
#include "core/mapped_file.h"
#include "core/npy.h"
#include "engine/perplexity.h"

namespace fak::cli {

void RegisterPerplexity(CLI::App& app, Context& ctx) {
  auto* cmd =
      app.add_subcommand("perplexity", "Perplexity of a text (llama-perplexity's chunks), KL against a base");
  static ModelFlags mf;
  static std::string text_file, base_model, dump_logits;
  static int64_t max_chunks = 0;
  static bool json = false;
  mf.Add(cmd);
  cmd->add_option("-f,--file", text_file, "The text")->required();
  cmd->add_option("--chunks", max_chunks, "Most chunks (0: all)");
  cmd->add_option(
      "--kl-base", base_model,
      "Base model (e.g. the F16 of a quantized file): KL divergence and top-1 agreement against it");
  cmd->add_flag("--json", json, "Print the result as JSON on stdout");
  cmd->add_option("--dump-logits", dump_logits, "Write the logits of every scored position (float32 .npy)");
  cmd->callback([&ctx]() {
    auto fail = [&](const std::string& m) { ctx.exit_code = Fail(m); };
    auto text = ReadFileToString(text_file);
    if (!text.ok()) return fail(text.status().ToString());
    auto loaded = LoadForRun(mf);
    if (!loaded.ok()) return fail(loaded.status().ToString());
    const int64_t chunk_ctx =
        ContextFor(mf, *loaded->model);  // -c: tokens per chunk, as llama-perplexity's -c
    auto session = CreateSession(mf, *loaded, chunk_ctx);
    if (!session.ok()) return fail(session.status().ToString());
    const Tokenizer& tok = *loaded->tokenizer;
    auto ids = tok.Encode(*text, EncodeOptions{.add_special = true, .parse_special = false});
    if (!ids.ok()) return fail(ids.status().ToString());
    LoadedModel base_loaded;
    std::unique_ptr<Session> base;
    if (!base_model.empty()) {
      ModelFlags bf = mf;
      bf.model = base_model;
      bf.quant = "keep";
      auto b = LoadForRun(bf);
      if (!b.ok()) return fail("--kl-base: " + b.status().ToString());
      base_loaded = std::move(*b);
      auto bs = CreateSession(bf, base_loaded, chunk_ctx);
      if (!bs.ok()) return fail("--kl-base: " + bs.status().ToString());
      base = std::move(*bs);
    }
    PerplexityOptions o;
    o.ctx = chunk_ctx;
    o.max_chunks = max_chunks;
    o.bos = tok.spec().add_bos ? tok.bos_id() : -1;
    o.progress = [](int64_t done, int64_t all, double ppl) {
      std::fprintf(stderr, "[%lld/%lld] %.4f\n", static_cast<long long>(done), static_cast<long long>(all),
                   ppl);
    };
    std::unique_ptr<NpyRowWriter> dump;
    if (!dump_logits.empty()) {
      auto w = NpyRowWriter::Create(dump_logits, (*session)->vocab_size());
      if (!w.ok()) return fail("--dump-logits: " + w.status().ToString());
      dump = std::move(*w);
      o.on_scored_logits = [&dump](std::span<const float> row) { return dump->Append(row); };
    }
    auto r = ComputePerplexity(**session, *ids, o, base.get());
    if (!r.ok()) return fail(r.status().ToString());
    if (dump) {
      if (Status st = dump->Finish(); !st.ok()) return fail(st.ToString());
    }
    if (json) {
      nlohmann::ordered_json j = {{"model", mf.model}, {"text", text_file},     {"tokens", ids->size()},
                                  {"ctx", r->ctx},     {"chunks", r->chunks},   {"scored", r->scored},
                                  {"ppl", r->ppl},     {"ppl_err", r->ppl_err}, {"chunk_ppl", r->chunk_ppl}};
      if (r->has_base) {
        j["base"] = base_model;
        j["base_ppl"] = r->base_ppl;
        j["kl_mean"] = r->kl_mean;
        j["kl_err"] = r->kl_err;
        j["kl_max"] = r->kl_max;
        j["top1_agreement"] = r->top1_agreement;
      }
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("perplexity: %.4f +/- %.4f (%lld chunks of %lld tokens, %lld positions scored)\n", r->ppl,
                r->ppl_err, static_cast<long long>(r->chunks), static_cast<long long>(r->ctx),
                static_cast<long long>(r->scored));
    if (r->has_base) {
      std::printf(
          "base perplexity: %.4f; KL(base || model) mean %.6f +/- %.6f nats, max %.4f; top-1 agreement "
          "%.2f%%\n",
          r->base_ppl, r->kl_mean, r->kl_err, r->kl_max, 100 * r->top1_agreement);
    }
  });
}

}  // namespace fak::cli
