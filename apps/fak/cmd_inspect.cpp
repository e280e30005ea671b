// fak inspect FILE|DIR [--json] [--digest]: what a model file holds. One JSON document is built
// and either printed as JSON or rendered as text, so both views always agree.
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/fak/commands.h"
#include "core/mapped_file.h"
#include "core/sha256.h"
#include "formats/gguf.h"
#include "formats/model_config.h"
#include "formats/safetensors.h"

namespace fak::cli {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr size_t kArrayPreview = 8;  // long arrays (vocabularies) are summarised

json ValueToJson(const GgufValue& v, bool full) {
  if (const auto* a = v.AsArray()) {
    json arr = json::array();
    const size_t n = full ? a->values.size() : std::min(a->values.size(), kArrayPreview);
    for (size_t i = 0; i < n; ++i) arr.push_back(ValueToJson(a->values[i], full));
    if (full || a->values.size() <= kArrayPreview) return arr;
    return json{{"type", fmt::format("array[{}]", GgufValueTypeName(a->element_type))},
                {"length", a->values.size()},
                {"head", arr}};
  }
  if (const auto* s = v.AsString()) return *s;
  if (auto b = v.AsBool()) return *b;
  if (v.type == GgufValueType::kFloat32 || v.type == GgufValueType::kFloat64) return *v.AsFloat();
  if (auto i = v.AsInt()) return *i;
  if (auto u = v.AsUint()) return *u;
  return nullptr;
}

json ShapeJson(const std::vector<uint64_t>& shape) { return json(shape); }

void AddTotals(json& doc) {
  uint64_t bytes = 0, params = 0;
  std::map<std::string, uint64_t> by_type;
  for (const auto& t : doc["tensors"]) {
    bytes += t["bytes"].get<uint64_t>();
    params += t["elements"].get<uint64_t>();
    by_type[t["type"].get<std::string>()] += t["elements"].get<uint64_t>();
  }
  doc["totals"] = {{"tensors", doc["tensors"].size()},
                   {"bytes", bytes},
                   {"parameters", params},
                   {"parameters_by_type", by_type}};
}

Result<json> InspectGguf(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open(path));
  json doc = {{"format", "gguf"},           {"path", path},
              {"version", f.version()},     {"file_bytes", f.file_size()},
              {"alignment", f.alignment()}, {"data_offset", f.data_offset()}};
  json meta = json::object();
  for (const auto& [k, v] : f.metadata()) meta[k] = ValueToJson(v, /*full=*/false);
  doc["metadata"] = meta;
  json tensors = json::array();
  for (const auto& t : f.tensors()) {
    tensors.push_back({{"name", t.name},
                       {"type", std::string(GgmlTypeName(t.type))},
                       {"shape", ShapeJson(t.shape)},
                       {"elements", t.n_elements},
                       {"bytes", t.n_bytes},
                       {"offset", f.data_offset() + t.offset}});
  }
  doc["tensors"] = tensors;
  auto cfg = ModelConfigFromGguf(f);
  if (cfg.ok()) {
    doc["model"] = {{"arch", cfg->arch},     {"n_layer", cfg->n_layer},     {"d_model", cfg->d_model},
                    {"n_head", cfg->n_head}, {"n_kv_head", cfg->n_kv_head}, {"vocab_size", cfg->vocab_size}};
  }
  AddTotals(doc);
  return doc;
}

json SafetensorsTensors(const std::vector<const SafetensorsTensor*>& ts) {
  json tensors = json::array();
  for (const auto* t : ts) {
    tensors.push_back({{"name", t->name},
                       {"type", std::string(SafetensorsDtypeName(t->dtype))},
                       {"shape", ShapeJson(t->shape)},
                       {"elements", t->n_elements},
                       {"bytes", t->n_bytes}});
  }
  return tensors;
}

Result<json> InspectSafetensors(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(SafetensorsCheckpoint ck, SafetensorsCheckpoint::Open(path));
  json doc = {{"format", "safetensors"}, {"path", path}};
  json shards = json::array();
  for (const auto& s : ck.shards()) {
    shards.push_back({{"path", s->path()}, {"file_bytes", s->file_size()}, {"tensors", s->tensors().size()}});
  }
  doc["shards"] = shards;
  json meta = json::object();
  for (const auto& [k, v] : ck.shards().front()->metadata()) meta[k] = v;
  doc["metadata"] = meta;
  doc["tensors"] = SafetensorsTensors(ck.tensors());
  if (fs::is_directory(path) && fs::exists(fs::path(path) / "config.json")) {
    FAK_ASSIGN_OR_RETURN(ModelConfig c, ModelConfigFromHfDir(path));
    doc["format"] = "huggingface";
    doc["model"] = {{"arch", c.arch},
                    {"hf_architecture", c.hf_architecture},
                    {"n_layer", c.n_layer},
                    {"d_model", c.d_model},
                    {"n_head", c.n_head},
                    {"n_kv_head", c.n_kv_head},
                    {"head_dim", c.head_dim},
                    {"d_ffn", c.d_ffn},
                    {"vocab_size", c.vocab_size},
                    {"rope_theta", c.rope.theta},
                    {"rope_scaling", RopeScalingName(c.rope.scaling)},
                    {"tied_embeddings", c.tied_embeddings},
                    {"torch_dtype", c.torch_dtype}};
  }
  AddTotals(doc);
  return doc;
}

Result<json> Inspect(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return InspectSafetensors(path);
  if (!fs::exists(path, ec)) return NotFound("{}: no such file or directory", path);
  FAK_ASSIGN_OR_RETURN(MappedFile probe, MappedFile::Open(path));
  const bool gguf_magic = probe.size() >= 4 && std::memcmp(probe.data(), "GGUF", 4) == 0;
  if (gguf_magic || path.ends_with(".gguf")) return InspectGguf(path);
  if (path.size() > 12 && path.ends_with(".safetensors")) return InspectSafetensors(path);
  return Unsupported("{}: not a GGUF file (magic 'GGUF') nor a .safetensors file or checkpoint folder", path);
}

Status AddDigests(json& doc) {
  if (doc.contains("shards")) {
    for (auto& s : doc["shards"]) {
      FAK_ASSIGN_OR_RETURN(std::string h, Sha256File(s["path"].get<std::string>()));
      s["sha256"] = h;
    }
  } else {
    FAK_ASSIGN_OR_RETURN(std::string h, Sha256File(doc["path"].get<std::string>()));
    doc["sha256"] = h;
  }
  return Status::Ok();
}

std::string HumanBytes(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.2f} MiB", static_cast<double>(b) / (1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(b) / (1ull << 10));
  return fmt::format("{} B", b);
}

// File-derived text made safe for a terminal: invalid UTF-8 becomes U+FFFD and control characters
// are escaped (\n, \u001b, ...), as JSON writes them.
std::string Term(const std::string& s) {
  const std::string quoted = json(s).dump(-1, ' ', false, json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}
// Any value as one line of JSON, with the same replacements.
std::string Term(const json& v) {
  return v.is_string() ? Term(v.get<std::string>()) : v.dump(-1, ' ', false, json::error_handler_t::replace);
}

void PrintText(const json& doc) {
  fmt::print("format: {}\npath: {}\n", doc["format"].get<std::string>(), doc["path"].get<std::string>());
  if (doc.contains("version")) {
    fmt::print("version: {}  alignment: {}  data offset: {}  file size: {}\n", doc["version"].get<int>(),
               doc["alignment"].get<uint64_t>(), doc["data_offset"].get<uint64_t>(),
               HumanBytes(doc["file_bytes"].get<uint64_t>()));
  }
  if (doc.contains("sha256")) fmt::print("sha256: {}\n", doc["sha256"].get<std::string>());
  if (doc.contains("shards")) {
    for (const auto& s : doc["shards"]) {
      fmt::print("shard: {} ({}, {} tensors){}\n", s["path"].get<std::string>(),
                 HumanBytes(s["file_bytes"].get<uint64_t>()), s["tensors"].get<size_t>(),
                 s.contains("sha256") ? "  sha256 " + s["sha256"].get<std::string>() : "");
    }
  }
  if (doc.contains("model")) {
    fmt::print("\nmodel:\n");
    for (auto it = doc["model"].begin(); it != doc["model"].end(); ++it)
      fmt::print("  {:<18} {}\n", Term(it.key()), Term(it.value()));
  }
  fmt::print("\nmetadata ({} keys):\n", doc["metadata"].size());
  for (auto it = doc["metadata"].begin(); it != doc["metadata"].end(); ++it) {
    const json& val = it.value();
    std::string v = Term(val);
    if (val.is_object() && val.contains("length")) {  // a summarised long array
      v = fmt::format("{} of {}: {} ...", val["type"].get<std::string>(), val["length"].get<uint64_t>(),
                      Term(val["head"]));
    }
    if (v.size() > 100) v = v.substr(0, 97) + "...";
    fmt::print("  {:<40} {}\n", Term(it.key()), v);
  }
  fmt::print("\ntensors:\n  {:<48} {:<6} {:<22} {:>12}\n", "name", "type", "shape", "bytes");
  for (const auto& t : doc["tensors"]) {
    std::string shape;
    for (const auto& d : t["shape"])
      shape += (shape.empty() ? "" : " x ") + std::to_string(d.get<uint64_t>());
    fmt::print("  {:<48} {:<6} {:<22} {:>12}\n", Term(t["name"]), Term(t["type"]),
               shape.empty() ? "scalar" : shape, t["bytes"].get<uint64_t>());
  }
  const json& tot = doc["totals"];
  fmt::print("\ntotals: {} tensors, {} parameters, {}\n", tot["tensors"].get<size_t>(),
             tot["parameters"].get<uint64_t>(), HumanBytes(tot["bytes"].get<uint64_t>()));
  for (auto it = tot["parameters_by_type"].begin(); it != tot["parameters_by_type"].end(); ++it) {
    fmt::print("  {:<6} {} parameters\n", it.key(), it.value().get<uint64_t>());
  }
}

}  // namespace

void RegisterInspect(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("inspect", "Show a GGUF or safetensors model's metadata and tensors");
  static std::string path;
  static bool as_json = false, digest = false;
  cmd->add_option("path", path, "GGUF file, .safetensors file, or HuggingFace checkpoint folder")->required();
  cmd->add_flag("--json", as_json, "Print one JSON document");
  cmd->add_flag("--digest", digest, "Add the SHA-256 of each file");
  cmd->callback([&ctx]() {
    auto doc = Inspect(path);
    if (!doc.ok()) {
      ctx.exit_code = Fail(doc.status().ToString());
      return;
    }
    if (digest) {
      Status s = AddDigests(*doc);
      if (!s.ok()) {
        ctx.exit_code = Fail(s.ToString());
        return;
      }
    }
    if (as_json) {
      fmt::print("{}\n", doc->dump(2, ' ', false, json::error_handler_t::replace));
    } else {
      PrintText(*doc);
    }
  });
}

}  // namespace fak::cli
