#include "engine/convert/quantize.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include <fmt/ranges.h>
#include "core/mapped_file.h"
#include "core/timer.h"
#include "engine/arch/arch.h"      // FindArchitecture
#include "engine/weight_source.h"  // OpenWeightSource
#include "quant/codec.h"           // CanDequantize, DequantizeRow
#include "tokenizer/loader.h"      // LoadTokenizerSpec

namespace fak::convert {
namespace {

namespace fs = std::filesystem;

struct Tensor {
  std::string name;
  std::vector<uint64_t> shape;
  GgmlType type;
  const uint8_t* data;
  uint64_t n_bytes;
  std::shared_ptr<const SourceTransform> transform = nullptr;  // an HF tensor's mapping into GGUF's form
};

uint64_t Elements(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

GgufWriter::Producer WithProgress(const TensorProgress& progress, size_t i, size_t n, std::string name,
                                  GgufWriter::Producer p) {
  if (!progress) return p;
  return [&progress, i, n, name = std::move(name), p = std::move(p)](std::span<uint8_t> out) {
    progress(i, n, name);
    return p(out);
  };
}

// What the file-type rule needs to know of a tensor beyond its name and shape.
struct TensorRoles {
  bool output = false;
  bool more_bits = false;
  bool f32 = false;  // a table an op reads whole (a convolution kernel): always f32, as llama.cpp wants it
};

// Adds `t` converted to the type the file type's rule gives it. `source_row` maps an output row to
// the input row it comes from (the llama q/k permutation); identity when null.
Status AddConverted(GgufWriter& w, ThreadPool& pool, FileType ft, const Tensor& t, int64_t n_layer,
                    const TensorRoles& roles, std::function<int64_t(int64_t)> source_row,
                    const TensorProgress& progress, size_t index, size_t count, ConvertReport& report) {
  const int64_t cols = static_cast<int64_t>(t.shape[0]);
  const int64_t rows = static_cast<int64_t>(Elements(t.shape) / t.shape[0]);
  const TensorDesc desc{t.name,         static_cast<int>(t.shape.size()), cols, n_layer, roles.output,
                        roles.more_bits};
  GgmlType target = TensorTypeFor(ft, desc);
  if (!IsQuantizable(desc) && (t.shape.size() > 1 || !CanDequantize(t.type)))
    target = t.type;  // copied as is
  if (roles.f32 && CanDequantize(t.type)) target = GgmlType::kF32;
  report.parameters += Elements(t.shape);
  ++report.tensors;
  if (target == t.type && !source_row && t.transform == nullptr) {
    if (t.n_bytes != *GgmlRowBytes(t.type, Elements(t.shape))) {
      return Corrupt("tensor '{}': {} bytes for its shape and type", t.name, t.n_bytes);
    }
    const uint8_t* data = t.data;
    GgufWriter::Producer copy = [data](std::span<uint8_t> out) {
      std::memcpy(out.data(), data, out.size());
      return Status::Ok();
    };
    return w.AddTensor(t.name, t.shape, t.type,
                       WithProgress(progress, index, count, t.name, std::move(copy)));
  }
  if (!CanDequantize(t.type)) {
    return Unsupported("tensor '{}' is {}, which fak cannot convert to {} (it reads {})", t.name,
                       GgmlTypeName(t.type), GgmlTypeName(target), "f32, f16, bf16, q8_0, q4_k, q6_k");
  }
  const auto src_row_bytes = GgmlRowBytes(t.type, static_cast<uint64_t>(cols));
  if (!src_row_bytes || *src_row_bytes * static_cast<uint64_t>(rows) != t.n_bytes) {
    return Corrupt("tensor '{}': {} bytes do not hold {} rows of {} {}", t.name, t.n_bytes, rows, cols,
                   GgmlTypeName(t.type));
  }
  if (rows == 1 && source_row) {  // a permuted vector (q/k bias): elements move, not rows
    auto fn = [t, cols, source_row](int64_t, float* dst) -> Status {
      std::vector<float> v(static_cast<size_t>(cols));
      FAK_RETURN_IF_ERROR(DequantizeRow(t.type, t.data, v.data(), cols));
      for (int64_t i = 0; i < cols; ++i) dst[i] = v[static_cast<size_t>(source_row(i))];
      return Status::Ok();
    };
    return w.AddTensor(t.name, t.shape, target,
                       WithProgress(progress, index, count, t.name, RowProducer(pool, target, 1, cols, fn)));
  }
  if (t.transform != nullptr) {  // reordered or mapped values, row by row through f32
    const SourceTensor st{t.name, t.name, t.shape, t.type, t.data, t.n_bytes, t.transform};
    auto fn = [st, cols](int64_t r, float* dst) {
      std::vector<float> scratch;
      return ReadCanonicalRow(st, r, cols, dst, scratch);
    };
    return w.AddTensor(
        t.name, t.shape, target,
        WithProgress(progress, index, count, t.name, RowProducer(pool, target, rows, cols, fn)));
  }
  const uint64_t rb = *src_row_bytes;
  auto fn = [t, cols, rb, source_row](int64_t r, float* dst) {
    const int64_t s = source_row ? source_row(r) : r;
    return DequantizeRow(t.type, t.data + static_cast<uint64_t>(s) * rb, dst, cols);
  };
  return w.AddTensor(t.name, t.shape, target,
                     WithProgress(progress, index, count, t.name, RowProducer(pool, target, rows, cols, fn)));
}

Status GgufToGguf(const QuantizeOptions& o, const FileTypeInfo& ft, ThreadPool& pool, ConvertReport& report) {
  FAK_ASSIGN_OR_RETURN(GgufFile in, GgufFile::Open(o.input));
  GgufWriter w(in.alignment());
  const bool new_tokenizer = !o.tokenizer.empty();
  for (const auto& [k, v] : in.metadata()) {
    if (k == "general.alignment" || (new_tokenizer && k.starts_with("tokenizer.ggml."))) continue;
    w.SetValue(k, v);
  }
  if (new_tokenizer) {
    auto spec = LoadTokenizerSpec(o.tokenizer);
    if (!spec.ok()) return spec.status().WithContext("loading --tokenizer");
    const GgufTensorInfo* embd = in.FindTensor("token_embd.weight");
    if (embd == nullptr || embd->shape.size() != 2) {
      return NotFound("{}: no 2-D token_embd.weight to size the vocabulary for --tokenizer", o.input);
    }
    FAK_RETURN_IF_ERROR(SetTokenizerMetadata(w, *spec, static_cast<int64_t>(embd->shape[1])));
  }
  w.SetUint32("general.file_type", ft.llama_ftype);
  w.SetUint32("general.quantization_version", 2);
  int64_t n_layer = 0;
  for (const GgufTensorInfo& t : in.tensors()) n_layer = std::max(n_layer, LayerOf(t.name) + 1);
  if (const GgufValue* arch = in.Find("general.architecture");
      arch != nullptr && arch->AsString() != nullptr) {
    if (in.Find(*arch->AsString() + ".block_count") != nullptr) {
      FAK_ASSIGN_OR_RETURN(uint64_t b, in.GetUint(*arch->AsString() + ".block_count"));
      n_layer = static_cast<int64_t>(b);
    }
  }
  // What each tensor is comes from its architecture's tensor list; for an architecture fak does not
  // know, only GGUF's own top-level names say which matrix is the output.
  std::map<std::string, TensorRoles> roles;
  if (auto c = ConfigFromGguf(in); c.ok() && FindArchitecture(c->arch) != nullptr) {
    c->tied_embeddings = in.FindTensor("output.weight") == nullptr;
    for (const PlannedTensor& p : PlanTensors(*c)) {
      roles[p.name] = {p.output, p.more_bits, p.kind == TensorKind::kTable};
    }
  } else {
    const bool tied = in.FindTensor("output.weight") == nullptr;
    roles["output.weight"] = {true, false};
    if (tied) roles["token_embd.weight"] = {true, false};
  }
  const size_t n = in.tensors().size();
  for (size_t i = 0; i < n; ++i) {
    const GgufTensorInfo& t = in.tensors()[i];
    const auto it = roles.find(t.name);
    FAK_RETURN_IF_ERROR(AddConverted(w, pool, ft.type, Tensor{t.name, t.shape, t.type, t.data, t.n_bytes},
                                     n_layer, it != roles.end() ? it->second : TensorRoles{}, nullptr,
                                     o.progress, i, n, report));
  }
  return w.Write(o.output);
}

Status HfToGguf(const QuantizeOptions& o, const FileTypeInfo& ft, ThreadPool& pool, ConvertReport& report) {
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> src, OpenWeightSource(o.input));
  ModelConfig c = src->config();
  if (!IsWritableArch(c.arch) && c.arch != "qwen3_next" && c.arch != "qwen3_5_moe") {
    return Unsupported(
        "{}: architecture '{}' cannot be written to GGUF by fak yet (llama, qwen2, qwen3, qwen3_5, "
        "qwen3_5_moe, "
        "qwen3_next)",
        o.input, c.arch);
  }
  // llama.cpp's expert hybrids have experts in every layer and always renormalise the chosen ones' weights.
  if (c.n_expert > 0 &&
      (!c.norm_top_k || c.layer_is_moe != std::vector<bool>(static_cast<size_t>(c.n_layer), true))) {
    return Unsupported(
        "{}: an expert model with dense layers or norm_topk_prob false has no GGUF form llama.cpp reads",
        o.input);
  }
  if (c.untied_stated && src->Find("output.weight") == nullptr) {
    return NotFound(
        "{}: config.json says tie_word_embeddings is false, but the checkpoint has no output matrix "
        "(lm_head.weight)",
        o.input);
  }
  c.tied_embeddings = c.tied_embeddings || src->Find("output.weight") == nullptr;
  auto loaded = LoadTokenizerSpec(o.tokenizer.empty() ? src->tokenizer_path() : o.tokenizer);
  if (!loaded.ok())
    return loaded.status().WithContext(o.tokenizer.empty() ? "loading the tokenizer" : "loading --tokenizer");
  TokenizerSpec spec = std::move(loaded).value();
  if (spec.bos_id < 0 && c.bos_token_id >= 0) spec.bos_id = static_cast<int32_t>(c.bos_token_id);
  if (spec.eos_id < 0 && !c.eos_token_ids.empty()) spec.eos_id = static_cast<int32_t>(c.eos_token_ids[0]);

  GgufWriter w;
  std::string name = fs::path(o.input).lexically_normal().filename().string();
  if (name.empty()) name = fs::path(o.input).lexically_normal().parent_path().filename().string();
  SetModelMetadata(w, c, name, ft);
  FAK_RETURN_IF_ERROR(SetTokenizerMetadata(w, spec, c.vocab_size));

  std::vector<float> rope_factors;
  if (c.rope.scaling == RopeScaling::kLlama3) {
    rope_factors = Llama3RopeFactors(c);
    FAK_RETURN_IF_ERROR(
        w.AddTensor("rope_freqs.weight", {rope_factors.size()}, GgmlType::kF32,
                    std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(rope_factors.data()),
                                             rope_factors.size() * 4)));
  }
  const int64_t hd = c.head_dim;
  const std::vector<PlannedTensor> plan = PlanTensors(c);
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedTensor& p = plan[i];
    const SourceTensor* st = src->Find(p.name);
    if (st == nullptr) return NotFound("{}: missing tensor '{}' for {}", o.input, p.name, c.arch);
    if (st->shape != p.shape) {
      return Corrupt("{}: tensor '{}' ({}) has shape [{}], want [{}] in ggml order", o.input, p.name,
                     st->source_name, fmt::join(st->shape, ", "), fmt::join(p.shape, ", "));
    }
    std::function<int64_t(int64_t)> perm;
    if (c.arch == "llama" && p.rope_rows) perm = [hd](int64_t r) { return LlamaPermutedSourceRow(r, hd); };
    FAK_RETURN_IF_ERROR(AddConverted(
        w, pool, ft.type, Tensor{p.name, st->shape, st->type, st->data, st->n_bytes, st->transform},
        c.n_layer, TensorRoles{p.output, p.more_bits, p.kind == TensorKind::kTable}, perm, o.progress, i,
        plan.size(), report));
  }
  return w.Write(o.output);
}

}  // namespace

int64_t LlamaPermutedSourceRow(int64_t row, int64_t head_dim) {
  const int64_t head = row / head_dim, w = row % head_dim;
  return head * head_dim + (w % 2) * (head_dim / 2) + w / 2;
}

std::vector<float> Llama3RopeFactors(const ModelConfig& c) {
  const RopeConfig& r = c.rope;
  const double orig = static_cast<double>(r.original_max_position > 0 ? r.original_max_position : 8192);
  const double low_wavelen = orig / r.low_freq_factor;
  const double high_wavelen = orig / r.high_freq_factor;
  std::vector<float> out;
  for (int64_t i = 0; i < c.head_dim; i += 2) {
    const double freq = 1.0 / std::pow(r.theta, static_cast<double>(i) / static_cast<double>(c.head_dim));
    const double wavelen = 2.0 * M_PI / freq;
    double f = 1.0;
    if (wavelen > low_wavelen) {
      f = r.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (orig / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      f = 1.0 / ((1.0 - smooth) / r.factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

Result<ConvertReport> QuantizeModel(const QuantizeOptions& o) {
  Timer timer;
  FAK_ASSIGN_OR_RETURN(const FileTypeInfo ft, FileTypeFromName(o.type));
  std::error_code ec;
  if (o.input.empty()) return InvalidArgument("no input given");
  if (!fs::exists(o.input, ec)) return NotFound("{}: no such file or directory", o.input);
  FAK_RETURN_IF_ERROR(CheckOutputPath(o.output));
  if (fs::equivalent(o.input, o.output, ec)) return InvalidArgument("output {} is the input file", o.output);
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<ThreadPool> threads, ThreadPool::Start(o.threads, /*pin=*/false));
  ThreadPool& pool = *threads;
  ConvertReport report;
  if (fs::is_directory(o.input, ec)) {
    FAK_RETURN_IF_ERROR(HfToGguf(o, ft, pool, report));
  } else {
    FAK_ASSIGN_OR_RETURN(MappedFile probe, MappedFile::Open(o.input));
    if (probe.size() < 4 || std::memcmp(probe.data(), "GGUF", 4) != 0) {
      return InvalidArgument("{}: not a GGUF file (no 'GGUF' magic) nor a checkpoint folder", o.input);
    }
    FAK_RETURN_IF_ERROR(GgufToGguf(o, ft, pool, report));
  }
  report.file_bytes = fs::file_size(o.output, ec);
  report.seconds = timer.Seconds();
  return report;
}

}  // namespace fak::convert
