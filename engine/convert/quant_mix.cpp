#include "engine/convert/quant_mix.h"

#include <array>
#include <charconv>

namespace fak::convert {
namespace {

constexpr std::array<FileTypeInfo, 7> kFileTypes = {{
    {FileType::kF32, "f32", 0, GgmlType::kF32},
    {FileType::kF16, "f16", 1, GgmlType::kF16},
    {FileType::kBF16, "bf16", 32, GgmlType::kBF16},
    {FileType::kQ8_0, "q8_0", 7, GgmlType::kQ8_0},
    {FileType::kQ4_K_M, "q4_k_m", 15, GgmlType::kQ4_K},
    {FileType::kQ4_K, "q4_k", 14, GgmlType::kQ4_K},  // every matrix Q4_K; llama.cpp calls the family Q4_K_S
    {FileType::kQ6_K, "q6_k", 18, GgmlType::kQ6_K},
}};

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool IsBlockQuant(GgmlType t) { return t != GgmlType::kF32 && t != GgmlType::kF16 && t != GgmlType::kBF16; }

}  // namespace

Result<FileTypeInfo> FileTypeFromName(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (const FileTypeInfo& i : kFileTypes) {
    if (i.name == lower) return i;
  }
  return InvalidArgument("unknown type '{}' (want one of {})", name, FileTypeNames());
}

const FileTypeInfo& GetFileTypeInfo(FileType type) {
  for (const FileTypeInfo& i : kFileTypes) {
    if (i.type == type) return i;
  }
  return kFileTypes[0];
}

std::string FileTypeNames() {
  std::string out;
  for (const FileTypeInfo& i : kFileTypes) out += (out.empty() ? "" : ", ") + std::string(i.name);
  return out;
}

bool UseMoreBits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

int64_t LayerOf(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  int64_t layer = -1;
  const char* b = name.data() + kPrefix.size();
  const char* e = name.data() + name.size();
  auto [p, ec] = std::from_chars(b, e, layer);
  if (ec != std::errc() || p == b || p == e || *p != '.') return -1;
  return layer;
}

bool IsQuantizable(const TensorDesc& t) {
  // llama.cpp keeps the small convolution kernels of recurrent layers as they are, and the experts'
  // routers (ffn_gate_inp, also the shared expert's gate ffn_gate_inp_shexp).
  return t.n_dims >= 2 && EndsWith(t.name, "weight") &&
         t.name.find("_norm.weight") == std::string_view::npos &&
         t.name.find("ssm_conv1d") == std::string_view::npos &&
         t.name.find("ffn_gate_inp") == std::string_view::npos;
}

GgmlType FallbackForRow(GgmlType want, int64_t ne0) {
  const auto traits = GetGgmlTypeTraits(want);
  if (traits && ne0 % traits->block_size == 0) return want;
  if (ne0 % 32 == 0) return GgmlType::kQ8_0;
  return GgmlType::kF16;
}

GgmlType TensorTypeFor(FileType ft, const TensorDesc& t) {
  if (!IsQuantizable(t)) return GgmlType::kF32;
  const FileTypeInfo& info = GetFileTypeInfo(ft);
  GgmlType type = info.base;
  if (IsBlockQuant(type) && ft != FileType::kQ4_K) {  // q4_k is the pure mix: no per-tensor rules
    const int64_t layer = LayerOf(t.name);
    if (t.output) {
      // llama.cpp: Q8_0 when the base type's block does not divide the row, else Q6_K unless Q8_0.
      const int64_t block = GetGgmlTypeTraits(type)->block_size;
      if (t.ne0 % block != 0) {
        type = GgmlType::kQ8_0;
      } else if (type != GgmlType::kQ8_0) {
        type = GgmlType::kQ6_K;
      }
    } else if (ft == FileType::kQ4_K_M && layer >= 0 && t.more_bits) {
      if (UseMoreBits(layer, t.n_layer)) type = GgmlType::kQ6_K;
    }
  }
  return FallbackForRow(type, t.ne0);
}

}  // namespace fak::convert
