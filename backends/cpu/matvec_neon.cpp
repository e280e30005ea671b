// Matrix-vector (decode) table for NEON with dotprod: neon_body.h's kernels for one token.
#include "backends/cpu/isa_tables.h"
#include "backends/cpu/neon_body.h"  // FillNeon

namespace fak::cpu {

void FillNeonMatVec(KernelTable* t) { FillNeon</*kMatVec=*/true>(t); }

}  // namespace fak::cpu
