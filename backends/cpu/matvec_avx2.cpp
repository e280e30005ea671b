// Matrix-vector (decode) table for AVX2: the 256-bit bodies over AVX2's int8 dot. Decode streams every
// weight byte once, so these only have to keep up with memory bandwidth.
#include "backends/cpu/isa_tables.h"
#include "backends/cpu/x86_dot_avx2.h"  // DotU8S8
#include "backends/cpu/x86_ymm_body.h"  // FillYmm

namespace fak::cpu {

void FillAvx2MatVec(KernelTable* t) { FillYmm</*kMatVec=*/true>(t); }

}  // namespace fak::cpu
