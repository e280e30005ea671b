#include "engine/arch/arch.h"

#include <algorithm>

namespace fak {

std::vector<const Architecture*> Architectures() {
  return {
      &LlamaFamily(),
      &Qwen35Hybrid(),
      &Qwen3NextHybrid(),
  };
}

Status ReallocActivation(Backend& be, Tensor& t, int64_t rows, int64_t cols) {
  if (t.data != nullptr) be.Free(t);
  t = {};
  FAK_ASSIGN_OR_RETURN(t, be.Alloc(rows, cols));
  return Status::Ok();
}

const Architecture* FindArchitecture(const std::string& arch) {
  for (const Architecture* a : Architectures()) {
    if (std::find(a->handles.begin(), a->handles.end(), arch) != a->handles.end()) return a;
  }
  return nullptr;
}

}  // namespace fak
