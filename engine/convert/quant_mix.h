// Output file types ("q4_k_m", "q8_0", ...) and which ggml type each tensor gets under them. The
// rules follow llama.cpp's llama-quantize so that fak's files have the same mix as the ecosystem's:
// Q4_K_M keeps the output matrix (the token embedding when it is tied) and, in the layers
// UseMoreBits picks, the tensors the architecture marks (llama: attn_v and ffn_down) at Q6_K.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "quant/ggml_type.h"

namespace fak::convert {

enum class FileType { kF32, kF16, kBF16, kQ8_0, kQ4_K_M, kQ4_K, kQ6_K };

struct FileTypeInfo {
  FileType type;
  std::string_view name;  // as given on the command line: "q4_k_m"
  uint32_t llama_ftype;   // general.file_type: llama.cpp's LLAMA_FTYPE_* number
  GgmlType base;          // type of most matrices
};

// InvalidArgument naming the known types for an unknown name.
Result<FileTypeInfo> FileTypeFromName(std::string_view name);
const FileTypeInfo& GetFileTypeInfo(FileType type);
// "f32, f16, bf16, q8_0, q4_k_m, q4_k, q6_k".
std::string FileTypeNames();

// llama.cpp's layer pick for the _M mixes: the first and last eighth of the layers and every third
// layer in between.
bool UseMoreBits(int64_t layer, int64_t n_layer);

// What the type rule needs to know about one tensor.
struct TensorDesc {
  std::string_view name;  // canonical GGUF name: "blk.3.attn_v.weight"
  int n_dims = 2;
  int64_t ne0 = 0;         // row length (shape[0])
  int64_t n_layer = 0;     // the model's block count
  bool output = false;     // the output projection (the token embedding when tied)
  bool more_bits = false;  // a tensor the _M mixes upgrade in the layers UseMoreBits picks
};

// True for the tensors llama.cpp quantizes: two or more dimensions, a name ending in "weight", not
// a norm. Everything else keeps F32.
bool IsQuantizable(const TensorDesc& t);

// The type `t` is stored as in a file of type `ft`, after the row-length fallback.
GgmlType TensorTypeFor(FileType ft, const TensorDesc& t);

// When `want` does not divide a row of ne0 elements: llama.cpp falls back Q4_K -> Q5_0 and
// Q6_K -> Q8_0; fak has no Q5_0 codec, so both go to Q8_0, and to F16 when 32 does not divide ne0
// either.
GgmlType FallbackForRow(GgmlType want, int64_t ne0);

// Layer index of "blk.N.xxx", or -1.
int64_t LayerOf(std::string_view name);

}  // namespace fak::convert
