#include "engine/convert/synth.h"

#include <filesystem>
#include <memory>

#include "core/timer.h"
#include "engine/convert/random_weights.h"
#include "tokenizer/loader.h"  // LoadTokenizerSpec

namespace fak::convert {
namespace {

int32_t FindToken(const TokenizerSpec& spec, const std::string& content) {
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    if (spec.tokens[i] == content) return static_cast<int32_t>(i);
  }
  return -1;
}

}  // namespace

ValueScale SynthValueScale(TensorKind kind) {
  switch (kind) {
    case TensorKind::kMatrix: return {0.0f, 0.02f};
    case TensorKind::kNorm: return {1.0f, 0.02f};
    case TensorKind::kBias: return {0.0f, 0.01f};
    case TensorKind::kTable: return {0.0f, 0.2f};
  }
  return {0.0f, 0.02f};
}

Result<ConvertReport> Synthesize(const SynthOptions& o) {
  Timer timer;
  const SynthGeometry* g = FindGeometry(o.geometry);
  if (g == nullptr)
    return InvalidArgument("unknown geometry '{}' (want one of {})", o.geometry, GeometryNames());
  FAK_ASSIGN_OR_RETURN(const FileTypeInfo ft, FileTypeFromName(o.type));
  FAK_ASSIGN_OR_RETURN(const ModelConfig config, ConfigForGeometry(*g, o.arch, kSynthVocab));
  FAK_RETURN_IF_ERROR(CheckOutputPath(o.output));
  if (o.tokenizer.empty())
    return InvalidArgument("no tokenizer given (a Qwen2 tokenizer.json or its folder)");
  auto loaded = LoadTokenizerSpec(o.tokenizer);
  if (!loaded.ok()) return loaded.status().WithContext("loading the tokenizer");
  TokenizerSpec spec = std::move(loaded).value();
  if (spec.model != TokenizerModel::kBpe) {
    return InvalidArgument("{}: synth embeds a byte-level BPE tokenizer (Qwen2's); this one is SentencePiece",
                           spec.source);
  }
  // Qwen2.5's config.json names <|endoftext|> as BOS (never added) and its tokenizer does not.
  if (spec.bos_id < 0) spec.bos_id = FindToken(spec, "<|endoftext|>");
  if (spec.pad_id < 0) spec.pad_id = spec.bos_id;

  GgufWriter w;
  SetModelMetadata(w, config, fmt::format("synthetic {} {} (seed {})", g->name, config.arch, o.seed), ft);
  FAK_RETURN_IF_ERROR(SetTokenizerMetadata(w, spec, config.vocab_size));
  w.SetUint64("fak.synth.seed", o.seed);
  w.SetString("fak.synth.geometry", std::string(g->name));

  FAK_ASSIGN_OR_RETURN(std::unique_ptr<ThreadPool> threads, ThreadPool::Start(o.threads, /*pin=*/false));
  ThreadPool& pool = *threads;
  const std::vector<PlannedTensor> plan = PlanTensors(config);
  ConvertReport report;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedTensor& t = plan[i];
    const int64_t cols = static_cast<int64_t>(t.shape[0]);
    int64_t rows = 1;  // every dimension past the row length (the experts of a stack too)
    for (size_t d = 1; d < t.shape.size(); ++d) rows *= static_cast<int64_t>(t.shape[d]);
    const TensorDesc desc{t.name,     static_cast<int>(t.shape.size()), cols, config.n_layer, t.output,
                          t.more_bits};
    const GgmlType type = TensorTypeFor(ft.type, desc);
    ValueScale scale = SynthValueScale(t.kind);
    if (t.name.ends_with(".ssm_a")) scale = {-1.0f, 0.1f};  // -exp(A_log): each head's state decays
    const uint64_t key = TensorKey(o.seed, t.name);
    GgufWriter::Producer rows_producer = RowProducer(pool, type, rows, cols, [=](int64_t r, float* dst) {
      FillRandomRow(key, static_cast<uint64_t>(r) * static_cast<uint64_t>(cols), scale.mean, scale.stddev,
                    dst, cols);
      return Status::Ok();
    });
    GgufWriter::Producer producer = rows_producer;
    if (o.progress) {
      producer = [&o, i, n = plan.size(), name = t.name, rows_producer](std::span<uint8_t> out) {
        o.progress(i, n, name);
        return rows_producer(out);
      };
    }
    FAK_RETURN_IF_ERROR(w.AddTensor(t.name, t.shape, type, std::move(producer)));
    report.parameters += static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols);
  }
  FAK_RETURN_IF_ERROR(w.Write(o.output));
  report.tensors = plan.size();
  std::error_code ec;
  report.file_bytes = std::filesystem::file_size(o.output, ec);
  report.seconds = timer.Seconds();
  return report;
}

}  // namespace fak::convert
