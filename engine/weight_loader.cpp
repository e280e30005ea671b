#include "engine/weight_loader.h"

#include <algorithm>
#include <cstring>

#include <fmt/ranges.h>

#include "quant/codec.h"

namespace fak {
namespace {

bool IsKernelType(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K: return true;
    default: return false;
  }
}

bool IsFloatType(GgmlType t) { return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16; }

// Formats the backends compute with; others (the read-only q4_0 .. q5_1) are converted at load.
bool IsComputeType(GgmlType t) {
  return IsFloatType(t) || t == GgmlType::kQ8_0 || t == GgmlType::kQ4_K || t == GgmlType::kQ6_K;
}

bool Fits(GgmlType t, int64_t cols) {
  auto tr = GetGgmlTypeTraits(t);
  return tr && cols % tr->block_size == 0;
}

}  // namespace

const WeightLayout& WeightLoader::Layout() const {
  return options_.layout != nullptr ? *options_.layout : DefaultWeightLayout();
}

void WeightLoader::BeginLoad(WeightArena* arena) {
  pass_ = Pass::kLoad;
  arena_ = arena;
  progress_ = std::make_unique<ProgressBar>("loading weights", planned_bytes_);
}

GgmlType WeightLoader::TargetType(GgmlType src, int64_t cols, bool embedding) const {
  // Where a block format does not divide the row, keep the next best format that does.
  const GgmlType fallback = IsFloatType(src) ? src : GgmlType::kF32;
  switch (options_.quant) {
    case WeightQuant::kKeep: return IsComputeType(src) ? src : GgmlType::kF32;  // f32 holds them exactly
    case WeightQuant::kF32: return GgmlType::kF32;
    case WeightQuant::kBF16: return GgmlType::kBF16;
    case WeightQuant::kF16: return GgmlType::kF16;
    case WeightQuant::kQ8_0: return Fits(GgmlType::kQ8_0, cols) ? GgmlType::kQ8_0 : fallback;
    case WeightQuant::kQ4_K:
      // Like llama.cpp's Q4_K_M, the embedding/output matrix keeps 6 bits.
      if (embedding && Fits(GgmlType::kQ6_K, cols)) return GgmlType::kQ6_K;
      if (Fits(GgmlType::kQ4_K, cols)) return GgmlType::kQ4_K;
      return Fits(GgmlType::kQ8_0, cols) ? GgmlType::kQ8_0 : fallback;
  }
  return src;
}

Result<const SourceTensor*> WeightLoader::Get(const std::string& name, std::vector<uint64_t> shape,
                                              const char* what) const {
  const SourceTensor* t = source_.Find(name);
  if (t == nullptr) return NotFound("missing tensor '{}' ({})", name, what);
  if (t->shape != shape) {
    return Corrupt("tensor '{}' has shape [{}], want [{}] ({}, in ggml order)", name,
                   fmt::join(t->shape, ", "), fmt::join(shape, ", "), what);
  }
  if (!CanDequantize(t->type)) {
    return Unsupported("tensor '{}' is {}, which fak cannot read yet", name, GgmlTypeName(t->type));
  }
  return t;
}

Result<Weight> WeightLoader::Convert(const SourceTensor& t, GgmlType target, int64_t rows, int64_t cols,
                                     bool pack) {
  Weight w;
  w.type = target;
  w.rows = rows;
  w.cols = cols;
  auto row_bytes = GgmlRowBytes(target, static_cast<uint64_t>(cols));
  if (!row_bytes) {
    return Internal("tensor '{}': {} rows of {} do not fit {}", t.name, rows, cols, GgmlTypeName(target));
  }
  w.row_bytes = static_cast<size_t>(*row_bytes);
  const WeightLayout& layout = Layout();
  pack = pack && layout.Repacks(target, cols);
  w.packed = pack;
  const size_t total = pack ? layout.Bytes(target, rows, cols) : w.row_bytes * static_cast<size_t>(rows);
  const bool in_place =
      !pack && options_.use_mmap && target == t.type && source_.kind() == "gguf" && t.transform == nullptr;
  if (pass_ == Pass::kPlan) {
    if (!in_place) planned_bytes_ += WeightArena::Aligned(total);
    w.data = t.data;  // placeholder so present() holds during planning
    return w;
  }
  loaded_bytes_ += total;
  // Block scales must be finite (CheckBlockScales says why); checked as the rows are read below, or all
  // at once for a tensor used in place.
  auto check_scales = [&](int64_t row0, int64_t n) -> Status {
    if (t.transform != nullptr) return Status::Ok();  // read through f32 and requantized
    const size_t src_row = static_cast<size_t>(*GgmlRowBytes(t.type, static_cast<uint64_t>(cols)));
    Status s = CheckBlockScales(t.type, t.data + static_cast<size_t>(row0) * src_row, n, cols, row0);
    return s.ok() ? s : s.WithContext(fmt::format("tensor '{}' ({})", t.name, GgmlTypeName(t.type)));
  };
  if (in_place) {
    FAK_RETURN_IF_ERROR(check_scales(0, rows));
    w.data = t.data;
    return w;
  }
  uint8_t* dst = arena_->Allocate(total);
  if (dst == nullptr) return Internal("weight arena too small for '{}' ({} bytes)", t.name, total);
  const size_t src_row = static_cast<size_t>(*GgmlRowBytes(t.type, static_cast<uint64_t>(cols)));
  // Rows are produced in groups of the packed layout's height (or one at a time), converted through
  // one f32 row of scratch, so no whole-tensor copy is ever made.
  const int64_t group = pack ? layout.GroupRows() : 1;
  const size_t group_out = pack ? layout.GroupBytes(target, cols) : w.row_bytes;
  std::vector<float> scratch(static_cast<size_t>(cols)), transform_scratch;
  std::vector<uint8_t> unaligned;
  std::vector<uint8_t> rows_buf(pack ? w.row_bytes * static_cast<size_t>(group) : 0);
  constexpr size_t kReleaseEvery = size_t{16} << 20;  // give source pages back every 16 MiB read
  size_t released = 0, released_parts = 0;
  for (int64_t g0 = 0; g0 < rows; g0 += group) {
    const int64_t n = std::min(group, rows - g0);
    const size_t read = static_cast<size_t>(g0) * src_row;
    // Rows read in place and in order give back what lies behind them; picked rows (row_from) may be
    // read again by a sibling tensor, so they give back nothing until the end; stacked experts give
    // back each expert's matrix once its rows are done.
    const SourceTransform* tf = t.transform.get();
    if (tf != nullptr && !tf->parts.empty()) {
      for (; released_parts < static_cast<size_t>(g0 / tf->part_rows); ++released_parts) {
        source_.Release(tf->parts[released_parts], tf->part_bytes);
      }
    } else if (read - released >= kReleaseEvery && (tf == nullptr || tf->row_from.empty())) {
      source_.Release(t.data + released, read - released);
      released = read;
    }
    FAK_RETURN_IF_ERROR(check_scales(g0, n));
    uint8_t* out = pack ? rows_buf.data() : dst + static_cast<size_t>(g0) * w.row_bytes;
    for (int64_t i = 0; i < n; ++i) {
      uint8_t* d = out + static_cast<size_t>(i) * w.row_bytes;
      if (t.transform != nullptr) {  // reordered or mapped values: through f32
        float* f = target == GgmlType::kF32 ? reinterpret_cast<float*>(d) : scratch.data();
        FAK_RETURN_IF_ERROR(ReadCanonicalRow(t, g0 + i, cols, f, transform_scratch));
        if (target != GgmlType::kF32) FAK_RETURN_IF_ERROR(QuantizeRow(target, f, d, cols));
        continue;
      }
      const uint8_t* s = t.data + static_cast<size_t>(g0 + i) * src_row;
      // A safetensors header need not be padded, so its data can sit at any address: the codecs
      // read 16- and 32-bit fields, so such rows are read from an aligned copy.
      if (reinterpret_cast<uintptr_t>(s) % 4 != 0 && target != t.type) {
        unaligned.assign(s, s + src_row);
        s = unaligned.data();
      }
      if (target == t.type) {
        std::memcpy(d, s, w.row_bytes);
      } else if (target == GgmlType::kF32) {
        FAK_RETURN_IF_ERROR(DequantizeRow(t.type, s, reinterpret_cast<float*>(d), cols));
      } else {
        FAK_RETURN_IF_ERROR(DequantizeRow(t.type, s, scratch.data(), cols));
        FAK_RETURN_IF_ERROR(QuantizeRow(target, scratch.data(), d, cols));
      }
    }
    if (pack) {
      FAK_RETURN_IF_ERROR(layout.Convert(target, rows_buf.data(), n, cols,
                                         dst + static_cast<size_t>(g0 / group) * group_out));
    }
  }
  ForEachStoredRange(t, [&](const uint8_t* data, uint64_t n) { source_.Release(data, n); });
  progress_->Update(arena_->used());
  w.data = dst;
  return w;
}

Result<Weight> WeightLoader::Matrix(const std::string& name, int64_t rows, int64_t cols, const char* what,
                                    bool embedding) {
  return MatrixImpl(name, rows, cols, what, embedding, /*pack=*/!embedding);
}

Result<WeightLoader::Tied> WeightLoader::TiedEmbedding(const std::string& name, int64_t rows, int64_t cols,
                                                       const char* what) {
  FAK_ASSIGN_OR_RETURN(const SourceTensor* t,
                       Get(name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)}, what));
  const GgmlType target = TargetType(t->type, cols, /*embedding=*/true);
  Tied tied;
  if (!Layout().Repacks(target, cols)) {
    FAK_ASSIGN_OR_RETURN(tied.lookup, MatrixImpl(name, rows, cols, what, /*embedding=*/true, /*pack=*/false));
    tied.lookup_as = tied.lookup.type;
    tied.output = tied.lookup;
    return tied;
  }
  FAK_ASSIGN_OR_RETURN(tied.output, MatrixImpl(name, rows, cols, what, /*embedding=*/true, /*pack=*/true));
  tied.lookup.type = t->type;
  tied.lookup.rows = rows;
  tied.lookup.cols = cols;
  tied.lookup.row_bytes = static_cast<size_t>(*GgmlRowBytes(t->type, static_cast<uint64_t>(cols)));
  tied.lookup.data = t->data;  // in the source mapping; only the rows looked up are ever read again
  tied.lookup_as = target;
  return tied;
}

Result<Weight> WeightLoader::MatrixImpl(const std::string& name, int64_t rows, int64_t cols, const char* what,
                                        bool embedding, bool pack, int64_t n_expert) {
  std::vector<uint64_t> shape = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)};
  if (n_expert > 0) shape.push_back(static_cast<uint64_t>(n_expert));
  FAK_ASSIGN_OR_RETURN(const SourceTensor* t, Get(name, shape, what));
  GgmlType target = TargetType(t->type, cols, embedding);
  if (!IsKernelType(target)) {
    return Unsupported("tensor '{}' is {}: fak has no CPU kernels for it (convert with --quant q8_0 or q4_k)",
                       name, GgmlTypeName(target));
  }
  // Experts are used one by one: each must begin on a group of the packed layout.
  if (n_expert > 0 && rows % Layout().GroupRows() != 0) pack = false;
  return Convert(*t, target, n_expert > 0 ? n_expert * rows : rows, cols, pack);
}

Result<Weight> WeightLoader::Experts(const std::string& name, int64_t n_expert, int64_t rows, int64_t cols,
                                     const char* what) {
  return MatrixImpl(name, rows, cols, what, /*embedding=*/false, /*pack=*/true, n_expert);
}

Result<Weight> WeightLoader::Vector(const std::string& name, int64_t n, const char* what) {
  FAK_ASSIGN_OR_RETURN(const SourceTensor* t, Get(name, {static_cast<uint64_t>(n)}, what));
  return Convert(*t, GgmlType::kF32, 1, n, /*pack=*/false);
}

Result<Weight> WeightLoader::Table(const std::string& name, int64_t rows, int64_t cols, const char* what) {
  FAK_ASSIGN_OR_RETURN(const SourceTensor* t,
                       Get(name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)}, what));
  return Convert(*t, GgmlType::kF32, rows, cols, /*pack=*/false);
}

Result<Weight> WeightLoader::OptionalVector(const std::string& name, int64_t n, const char* what) {
  if (!Has(name)) return Weight{};
  return Vector(name, n, what);
}

}  // namespace fak
