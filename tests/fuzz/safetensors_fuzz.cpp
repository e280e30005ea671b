// libFuzzer target for the safetensors reader: parse or fail cleanly; tensors stay inside the input.
#include <cstdint>
#include <cstdlib>

#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = fak::SafetensorsFile::Parse(std::span<const uint8_t>(data, size), "fuzz.safetensors");
  if (!f.ok()) {
    if (f.status().message().empty()) std::abort();
    return 0;
  }
  for (const auto& t : f->tensors()) {
    if (t.n_bytes > 0 && (t.data < data || t.data + t.n_bytes > data + size)) std::abort();
  }
  return 0;
}
