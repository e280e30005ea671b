// libFuzzer target: any byte string given as a tokenizer.json either loads into a tokenizer that
// encodes and decodes a few texts (valid UTF-8 in, ids in range out), or fails with a message. Never
// a crash, a hang or a sanitizer report.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tokenizer/spec_hf.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto spec = fak::TokenizerSpecFromHfJson(json, "", "fuzz/tokenizer.json");
  if (!spec.ok()) {
    if (spec.status().message().empty()) std::abort();
    return 0;
  }
  auto tok = fak::Tokenizer::Create(std::move(*spec));
  if (!tok.ok()) {
    if (tok.status().message().empty()) std::abort();
    return 0;
  }
  for (std::string_view text :
       {"Hello world", " leading  spaces\n\n", "caf\xc3\xa9 123 <|im_end|>", "\xff\xfe bad", ""}) {
    auto ids = tok->Encode(text, fak::EncodeOptions{.add_special = true, .parse_special = true});
    if (!ids.ok()) continue;
    for (int32_t id : *ids) {
      if (id < 0 || id >= tok->vocab_size()) std::abort();
    }
    (void)tok->Decode(*ids);
  }
  return 0;
}
