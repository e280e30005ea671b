// The architecture seam: each family is one file that binds its tensors and runs its forward pass,
// registered in one table (arch.cpp). Size variants are data (ModelConfig), not code.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "core/status.h"
#include "engine/kv_cache.h"
#include "engine/model.h"
#include "engine/weight_loader.h"

namespace fak {

// Per-session scratch for a forward pass, grown on demand.
struct ForwardScratch {
  std::vector<float> x, xn, q, k, v, attn, o, gate, up, down, scores, logits_in;
};

struct ForwardRequest {
  std::span<const int32_t> tokens;  // positions kv.size() .. kv.size() + tokens.size() - 1
  bool all_logits = false;          // logits for every token, else only the last
  float* logits = nullptr;          // (all_logits ? tokens.size() : 1, vocab)
};

struct Architecture {
  const char* name;
  std::vector<std::string> handles;  // ModelConfig::arch values
  // Binds every weight through the loader (called once to plan, once to load).
  Status (*bind)(Model& model, WeightLoader& loader);
  // Runs the tokens, appends their keys/values to kv, writes logits.
  Status (*forward)(const Model& model, KvSequence& kv, const ForwardRequest& request, ForwardScratch& scratch,
                    cpu::ThreadPool& pool);
};

// nullptr when no registered architecture handles `arch`.
const Architecture* FindArchitecture(const std::string& arch);

// Registered architectures (one line each in arch.cpp).
const Architecture& LlamaFamily();

}  // namespace fak
