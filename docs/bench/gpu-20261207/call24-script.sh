#!/bin/bash
# (FAK_CUDA_GEMM_TOTAL, which this script sets for its "old" arm, was removed in 45ff158 after call 23:
# with a later binary that arm runs the current GEMM.)
# Call 24: call 23 without the 27B, for a short device budget: the CUDA op tests of 89af59a (the GEMM's
# closed pieces' sum in shared memory, Q6_K rows of four pieces on four warps), the GEMM's again with the
# sum in registers, the kernel bench at 512 rows against "old", then pp512 of the 2B hybrid and the 1.5B
# Q4_K_M file under both, alternating. Carry: .cuda-run.
NO27=1 LIMIT=${LIMIT:-170} bash docs/bench/gpu-20261207/call23-script.sh
