#include "engine/arch/arch.h"

#include <algorithm>

namespace fak {

std::vector<const Architecture*> Architectures() {
  return {
      &LlamaFamily(),
      &Qwen35Hybrid(),
  };
}

const Architecture* FindArchitecture(const std::string& arch) {
  for (const Architecture* a : Architectures()) {
    if (std::find(a->handles.begin(), a->handles.end(), arch) != a->handles.end()) return a;
  }
  return nullptr;
}

}  // namespace fak
