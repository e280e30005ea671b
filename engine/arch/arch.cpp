#include "engine/arch/arch.h"

#include <algorithm>

namespace fak {

const Architecture* FindArchitecture(const std::string& arch) {
  static const Architecture* const kRegistry[] = {
      &LlamaFamily(),
  };
  for (const Architecture* a : kRegistry) {
    if (std::find(a->handles.begin(), a->handles.end(), arch) != a->handles.end()) return a;
  }
  return nullptr;
}

}  // namespace fak
