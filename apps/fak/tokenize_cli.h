// `fak tokenize -m MODEL (TEXT | -f FILE) [--ids] [--no-special]`: what the CLI calls.
#pragma once

#include <ostream>
#include <string>

#include "core/status.h"

namespace fak {

struct TokenizeOptions {
  std::string model;        // .gguf file, tokenizer.json or model directory
  std::string text;         // used when `file` is empty
  std::string file;         // read the text from this file
  bool ids_only = false;    // print a JSON array of ids instead of `id 'piece'` lines
  bool no_special = false;  // add no BOS/EOS and leave special tokens in the text as text
};

// Loads the tokenizer, encodes, prints. Errors name the model or file.
Status RunTokenize(const TokenizeOptions& options, std::ostream& out);

// A token's bytes for display: printable UTF-8 as is, quotes, backslashes, control bytes and bytes
// of an incomplete character escaped ("\n", "\x0b", "\xe6").
std::string EscapePiece(std::string_view bytes);

}  // namespace fak
