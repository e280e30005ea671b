#!/bin/bash
# Call 21 (planned, not yet run): call 13's measurement once more, with as many rounds as the call's time
# allows (up to six, call 13's guards stop it earlier): each round, the read bandwidth and the
# register-only int8 loop on one thread and on 16, then on the 1.5B Q8_0 and Q4_K_M files fak and
# llama.cpp's AVX-512 CPU build at 16 threads (pp256, tg64) and on one thread (pp256), alternating.
# Carry: .cuda-run (scripts/test-cuda.sh pack) and .llama-cpu (llama-cpu.tar.xz).
sed 's/^for r in 1 2 3; do$/for r in 1 2 3 4 5 6; do/' docs/bench/gpu-20261207/call13-script.sh | bash
