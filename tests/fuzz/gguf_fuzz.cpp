// libFuzzer target: any byte string given to the GGUF reader either parses into a table whose
// tensors all lie inside the input, or fails with a message. Never a crash or a sanitizer report.
#include <cstdint>
#include <cstdlib>

#include "formats/gguf.h"
#include "formats/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = fak::GgufFile::Parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!f.ok()) {
    if (f.status().message().empty()) std::abort();
    return 0;
  }
  for (const auto& t : f->tensors()) {
    if (t.data < data || t.data + t.n_bytes > data + size) std::abort();
  }
  for (const auto& [k, v] : f->metadata()) {
    (void)v.AsUint();
    (void)v.AsString();
  }
  (void)fak::ModelConfigFromGguf(*f);
  return 0;
}
