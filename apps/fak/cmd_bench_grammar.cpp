// fak bench grammar: what constrained decoding costs. The same prompt is decoded with a JSON schema's
// grammar and without, the same number of tokens, in alternating order round by round; each
// constrained round compiles the schema afresh (no mask cached), so the first-visit mask walks are
// paid inside the measured decode. Also timed: the vocabulary trie (once per model) and a new
// schema's preparation (schema to grammar, parse, start state, first mask).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/fak/commands.h"
#include "apps/fak/model_flags.h"
#include "engine/generate.h"
#include "grammar/json_schema.h"
#include "grammar/vocab.h"

namespace fak::cli {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

}  // namespace

void RegisterBenchGrammar(CLI::App* bench_cmd, Context& ctx) {
  auto* cmd =
      bench_cmd->add_subcommand("grammar", "Constrained (JSON schema) against free decoding, same run");
  static ModelFlags mf;
  static SamplingFlags sf;
  static std::string schema_file, prompt = "Describe the inventory as JSON.";
  static int64_t n_gen = 256, rounds = 3;
  static bool json = false;
  mf.Add(cmd);
  sf.Add(cmd);
  cmd->add_option("--json-schema", schema_file, "JSON schema file")->required();
  cmd->add_option("-p,--prompt", prompt, "Prompt text");
  cmd->add_option("-n,--n-gen", n_gen,
                  "Most tokens per run (the free run decodes as many as the constrained)");
  cmd->add_option("-r,--rounds", rounds, "Rounds (the arms alternate order)");
  cmd->add_flag("--json", json, "Print the result as JSON");
  cmd->callback([&ctx]() {
    auto fail = [&](const std::string& m) { ctx.exit_code = Fail(m); };
    auto loaded = LoadForRun(mf);
    if (!loaded.ok()) return fail(loaded.status().ToString());
    auto session = CreateSession(mf, *loaded);
    if (!session.ok()) return fail(session.status().ToString());
    auto raw = ReadFileToString(schema_file);
    if (!raw.ok()) return fail(raw.status().ToString());
    nlohmann::ordered_json schema;
    try {
      schema = nlohmann::ordered_json::parse(*raw);
    } catch (const nlohmann::json::exception& e) {
      return fail(fmt::format("--json-schema {}: not JSON: {}", schema_file, e.what()));
    }
    auto t0 = std::chrono::steady_clock::now();
    auto trie = grammar::BuildTokenTrie(*loaded->tokenizer, loaded->model->config.eos_token_ids);
    const double trie_s = Since(t0);
    auto ids = loaded->tokenizer->Encode(prompt, EncodeOptions{});
    if (!ids.ok()) return fail(ids.status().ToString());

    std::vector<double> prep, free_tps, cons_tps, ratio, walk_ms, max_walk_ms;
    std::vector<int64_t> walks;
    std::vector<int64_t> counts;
    std::vector<std::string> reasons;
    for (int64_t r = 0; r < rounds; ++r) {
      // Preparation of a new schema: nothing cached from earlier rounds.
      t0 = std::chrono::steady_clock::now();
      auto text = grammar::JsonSchemaToGrammar(schema);
      if (!text.ok()) return fail(text.status().ToString());
      auto g = grammar::Grammar::Parse(*text);
      if (!g.ok()) return fail(g.status().ToString());
      auto automaton =
          std::make_shared<grammar::Automaton>(std::make_shared<const grammar::Grammar>(std::move(*g)), trie);
      (void)automaton->Mask(automaton->start());
      prep.push_back(Since(t0));

      GenerateOptions cons;
      cons.sampling = sf.p;
      cons.max_tokens = n_gen;
      cons.grammar = automaton;
      GenerateOptions free;
      free.sampling = sf.p;
      free.ignore_eos = true;
      double c_tps = 0, f_tps = 0;
      int64_t count = 0;
      for (int arm = 0; arm < 2; ++arm) {
        const bool constrained = (arm == 0) == (r % 2 == 0);
        if (!constrained && count == 0) {
          // The free arm runs first this round: as many tokens as the last constrained run.
          free.max_tokens = counts.empty() ? n_gen : counts.back();
        } else if (!constrained) {
          free.max_tokens = count;
        }
        auto res = GenerateFromIds(**session, *loaded->tokenizer, *ids, constrained ? cons : free);
        if (!res.ok()) return fail(res.status().ToString());
        const double tps =
            res->decode_seconds > 0 ? static_cast<double>(res->output_ids.size()) / res->decode_seconds : 0;
        if (constrained) {
          const auto st = automaton->stats();
          walks.push_back(st.masks_computed);
          walk_ms.push_back(st.walk_seconds * 1e3);
          max_walk_ms.push_back(st.max_walk_seconds * 1e3);
          c_tps = tps;
          count = static_cast<int64_t>(res->output_ids.size());
          reasons.push_back(res->stop_reason);
        } else {
          f_tps = tps;
        }
      }
      counts.push_back(count);
      free_tps.push_back(f_tps);
      cons_tps.push_back(c_tps);
      ratio.push_back(f_tps > 0 ? c_tps / f_tps : 0);
      if (!json) {
        std::printf(
            "round %lld: constrained %lld tokens (%s) %.1f tok/s, free %.1f tok/s, ratio %.3f, schema "
            "preparation %.1f ms; %lld mask walks, %.1f ms in all, longest %.2f ms\n",
            static_cast<long long>(r + 1), static_cast<long long>(count), reasons.back().c_str(), c_tps,
            f_tps, ratio.back(), prep.back() * 1e3, static_cast<long long>(walks.back()), walk_ms.back(),
            max_walk_ms.back());
      }
    }
    nlohmann::ordered_json out = {{"model", mf.model},
                                  {"vocab", trie->vocab_size()},
                                  {"schema", schema_file},
                                  {"temperature", sf.p.temperature},
                                  {"trie_ms", trie_s * 1e3},
                                  {"prep_ms", prep},
                                  {"constrained_tps", cons_tps},
                                  {"free_tps", free_tps},
                                  {"tokens", counts},
                                  {"stop", reasons},
                                  {"ratio", ratio},
                                  {"mask_walks", walks},
                                  {"mask_walk_ms", walk_ms},
                                  {"longest_walk_ms", max_walk_ms},
                                  {"median_ratio", Median(ratio)},
                                  {"median_prep_ms", Median(prep) * 1e3}};
    if (json) {
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf(
          "vocabulary %d tokens, trie built in %.1f ms (once per model); schema preparation median "
          "%.1f ms; constrained/free decode median %.3f\n",
          trie->vocab_size(), trie_s * 1e3, Median(prep) * 1e3, Median(ratio));
    }
  });
}

}  // namespace fak::cli
