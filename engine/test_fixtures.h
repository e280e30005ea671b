// Shared fixtures the engine's tests read, by their path from the repository root (where ctest runs).
#pragma once

namespace fak {

// llama.cpp's tiny Llama at Q8_0 (../shared/fixtures/README.md).
inline constexpr const char* kTinyLlama = "../shared/fixtures/llamacpp-tiny/tiny-llama-q8_0.gguf";

}  // namespace fak
