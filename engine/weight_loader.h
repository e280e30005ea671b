// Binds a source's tensors to Weights in two passes: Plan sums the bytes every weight will take in
// its target format, so the arena is allocated once; Load converts each tensor straight into the
// arena a row at a time (dequantize one row to f32, quantize it to the target). No f32 copy of the
// model is ever held, and the result is bit-identical to converting a fully loaded f32 model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/progress.h"
#include "core/status.h"
#include "engine/model.h"

namespace fak {

class WeightLoader {
 public:
  enum class Pass { kPlan, kLoad };

  WeightLoader(const WeightSource& source, const LoadOptions& options) : source_(source), options_(options) {}

  // Switches from planning to loading into `arena` (after Plan was run and the arena sized).
  void BeginLoad(WeightArena* arena);
  Pass pass() const { return pass_; }
  uint64_t planned_bytes() const { return planned_bytes_; }
  uint64_t loaded_bytes() const { return loaded_bytes_; }

  bool Has(const std::string& name) const { return source_.Find(name) != nullptr; }
  // A (rows, cols) matrix converted to the target format. `what` explains the shape in errors
  // ("n_head*head_dim x d_model"). `embedding` matrices are also read row by row for lookups.
  // Matrices that only feed matmuls are converted into the backend's layout where it has one; `embedding`
  // matrices keep GGUF rows so single rows can be looked up.
  Result<Weight> Matrix(const std::string& name, int64_t rows, int64_t cols, const char* what,
                        bool embedding = false);
  // A stack of n_expert (rows, cols) matrices (GGUF shape {cols, rows, n_expert}) as one
  // (n_expert * rows, cols) matrix whose experts each start on a group of the backend's layout.
  Result<Weight> Experts(const std::string& name, int64_t n_expert, int64_t rows, int64_t cols,
                         const char* what);
  // A tied embedding, bound once for two uses. When the kernels prefer the packed layout, the output
  // projection is packed into the arena and lookups read the source's own rows in place (no second
  // copy in memory); `lookup_as` is then the arena copy's type, which lookups reproduce exactly.
  struct Tied {
    Weight lookup;
    GgmlType lookup_as = GgmlType::kF32;
    Weight output;
  };
  Result<Tied> TiedEmbedding(const std::string& name, int64_t rows, int64_t cols, const char* what);
  // An f32 vector of n elements.
  Result<Weight> Vector(const std::string& name, int64_t n, const char* what);
  // A small (rows, cols) f32 table read whole by an op (a convolution kernel), never quantized.
  Result<Weight> Table(const std::string& name, int64_t rows, int64_t cols, const char* what);
  // As Vector, or an empty Weight when the source lacks it.
  Result<Weight> OptionalVector(const std::string& name, int64_t n, const char* what);

  // The format a matrix of this source type and row length is stored in.
  GgmlType TargetType(GgmlType source_type, int64_t cols, bool embedding) const;

 private:
  const WeightLayout& Layout() const;
  Result<const SourceTensor*> Get(const std::string& name, std::vector<uint64_t> shape,
                                  const char* what) const;
  Result<Weight> Convert(const SourceTensor& t, GgmlType target, int64_t rows, int64_t cols, bool pack);
  Result<Weight> MatrixImpl(const std::string& name, int64_t rows, int64_t cols, const char* what,
                            bool embedding, bool pack, int64_t n_expert = 0);

  const WeightSource& source_;
  LoadOptions options_;
  Pass pass_ = Pass::kPlan;
  WeightArena* arena_ = nullptr;
  std::unique_ptr<ProgressBar> progress_;  // drawn on stderr when it is a terminal
  uint64_t planned_bytes_ = 0;
  uint64_t loaded_bytes_ = 0;
};

}  // namespace fak
