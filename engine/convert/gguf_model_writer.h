// The pieces shared by `fak synth` and `fak quantize`: a model's GGUF metadata from its ModelConfig,
// the tokenizer keys from a TokenizerSpec (the exact keys tokenizer/spec_gguf.cpp reads back), and a
// producer that fills a tensor row by row on a thread pool, quantizing each row as it is made.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/convert/quant_mix.h"
#include "formats/gguf_writer.h"
#include "formats/model_config.h"
#include "tokenizer/tokenizer_spec.h"

namespace fak::convert {

// general.* and <arch>.* keys (block_count, embedding_length, heads, rope, norm epsilon, ...).
void SetModelMetadata(GgufWriter& w, const ModelConfig& c, std::string_view name, const FileTypeInfo& ft);

// The GGUF tokenizer.ggml.pre name whose split patterns equal the spec's; NotFound when none does.
Result<std::string> GgufPreName(const TokenizerSpec& spec);

// tokenizer.ggml.* and tokenizer.chat_template. The token list is padded to vocab_size with
// "[PADn]" entries of type UNUSED (as llama.cpp's converter does); added tokens that look like
// "<|...|>" are CONTROL even when not marked special, again as llama.cpp does. Fails when the
// tokenizer has more tokens than vocab_size.
Status SetTokenizerMetadata(GgufWriter& w, const TokenizerSpec& spec, int64_t vocab_size);

// Writes row `row` (cols floats) of a tensor into dst. Called concurrently from several threads.
using RowFn = std::function<Status(int64_t row, float* dst)>;

// A GgufWriter producer for a (rows, cols) tensor of `type`: rows are split across the pool, each
// made by row_fn into a per-thread f32 buffer and quantized straight into the output.
GgufWriter::Producer RowProducer(ThreadPool& pool, GgmlType type, int64_t rows, int64_t cols, RowFn row_fn);

// Tells the caller which tensor is being produced (progress lines).
using TensorProgress = std::function<void(size_t index, size_t count, const std::string& name)>;

}  // namespace fak::convert

namespace fak::convert {

// InvalidArgument when `path` is empty, names a folder, or its folder does not exist.
Status CheckOutputPath(const std::string& path);

}  // namespace fak::convert
