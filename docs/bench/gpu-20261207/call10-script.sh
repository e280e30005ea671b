#!/bin/bash
# Call 10 (next round, not yet run): the CPU scaling issue's measurement of call 5 once more on a GPU
# machine's host, to settle which of calls 4 and 5 is typical there (docs/bench/cpu-scaling.md,
# 2026-12-07): fak and llama.cpp's AVX-512 CPU build at 16 threads, pp256 and tg64 on the 1.5B Q8_0 and
# Q4_K_M files, then fak's one-thread prefill, three rounds alternating; the measured read bandwidth.
# Carry: .cuda-run (`scripts/test-cuda.sh pack`) and .llama-cpu (llama-cpu.tar.xz).
. scripts/gpu-call.sh
$F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > /dev/null 2>&1
$F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1
mkdir -p /tmp/lc && python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .llama-cpu/llama-cpu.tar.xz /tmp/lc
LC=/tmp/lc/llama
$F bench kernels -t 16 --seconds 0.3 > $OUT/kern16.txt 2>&1
log $(grep -E 'read bandwidth|thread pool' $OUT/kern16.txt | tr '\n' ' ')
for r in 1 2 3; do
  for m in q8 q4; do
    [ $(el) -gt $((L - 40)) ] && break 2
    $F bench -m $M/$m.gguf -p 256 -n 64 -r 2 -t 16 > $OUT/fak-$m-r$r.txt 2>&1
    log fak $m r$r $(grep -E 'pp256|tg64' $OUT/fak-$m-r$r.txt | awk -F'|' '{printf "%s %s %s;", $7, $8, $9}')
    LD_LIBRARY_PATH=$LC timeout 60 $LC/llama-bench -m $M/$m.gguf -p 256 -n 64 -r 2 -t 16 > $OUT/llama-$m-r$r.txt 2>&1
    log llama $m r$r $(grep -E 'pp256|tg64' $OUT/llama-$m-r$r.txt | awk -F'|' '{printf "%s;", $(NF-1)}')
  done
  for m in q8 q4; do
    $F bench -m $M/$m.gguf -p 256 -n 0 -r 1 -t 1 > $OUT/fak1-$m-r$r.txt 2>&1
    log fak $m t1 r$r $(grep pp256 $OUT/fak1-$m-r$r.txt | awk -F'|' '{print $8}')
  done
done
log end
