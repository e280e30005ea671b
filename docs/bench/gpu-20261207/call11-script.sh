#!/bin/bash
# Call 11: two changes, each against the binary without it, in the same pack: the delta rule with eight
# lanes a column (fak-lanes against fak-base, the previous commit's build) and attention chunks of 128
# positions instead of 256 (fak, which has both, against fak-lanes). cuda_backend_test (of fak's build);
# the 2B hybrid Q4_K_M pp512 / tg32 of fak-base and fak-lanes alternating (eight rounds) and each one's
# op-by-op profile of a pp512 step; the 1.5B Q8_0 and Q4_K_M pp512 / tg128 of fak-lanes and fak
# alternating (four rounds); then the CPU scaling
# issue's measurement of call 5 once more (call10-script.sh's body: fak and llama.cpp's AVX-512 CPU
# build at 16 threads, pp256 and tg64 on the 1.5B Q8_0 and Q4_K_M files, fak's one-thread prefill,
# three rounds alternating, the measured read bandwidth).
# Carry: .cuda-run (`scripts/test-cuda.sh pack` with fak-base and fak-lanes added), .cuda-fixtures, .llama-cpu.
. scripts/gpu-call.sh
B=$PWD/.cuda-run/bin/fak-base
LN=$PWD/.cuda-run/bin/fak-lanes
( $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > $OUT/synth-h2.txt 2>&1
  $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > /dev/null 2>&1
  $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1; touch $M/synth.done ) &
timeout $((L * 18 / 100)) .cuda-run/bin/cuda_backend_test > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E 'FAILED|Failure' $OUT/tests.txt | head -8 >> $P
while [ ! -f $M/synth.done ] && [ $(el) -lt $((L * 30 / 100)) ]; do sleep 1; done
log synth done
for r in 1 2 3 4 5 6 7 8; do
  for b in $B $LN; do
    [ $(el) -gt $((L * 40 / 100)) ] && break 2
    timeout 25 $b bench -m $M/h2.gguf --backend cuda -p 512 -n 32 -r 2 > $OUT/h2-$(basename $b)-r$r.txt 2>&1
    log $(basename $b) r$r $(grep -E 'pp512|tg32' $OUT/h2-$(basename $b)-r$r.txt | awk -F'|' '{printf "%s;", $8}')
  done
done
for b in $B $LN; do
  FAK_CUDA_PROFILE=1 FAK_LOG=debug timeout 30 $b bench -m $M/h2.gguf --backend cuda -p 512 -n 0 -r 1 > $OUT/prof-$(basename $b).txt 2>&1
  log prof $(basename $b) $(grep 'CUDA step of 512 rows' $OUT/prof-$(basename $b).txt | tail -2 | grep -oE 'ops, [0-9.]+ ms|DeltaNetRule [0-9.]+ ms x[0-9]+' | tr '\n' ' ')
done
for r in 1 2 3 4; do
  for m in q8 q4; do
    for b in $LN $F; do
      [ $(el) -gt $((L * 60 / 100)) ] && break 3
      timeout 25 $b bench -m $M/$m.gguf --backend cuda -p 512 -n 128 -r 2 > $OUT/c-$m-$(basename $b)-r$r.txt 2>&1
      log $m $(basename $b) r$r $(grep -E 'pp512|tg128' $OUT/c-$m-$(basename $b)-r$r.txt | awk -F'|' '{printf "%s;", $8}')
    done
  done
done
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
    [ $(el) -gt $((L - 20)) ] && break 2
    $F bench -m $M/$m.gguf -p 256 -n 0 -r 1 -t 1 > $OUT/fak1-$m-r$r.txt 2>&1
    log fak $m t1 r$r $(grep pp256 $OUT/fak1-$m-r$r.txt | awk -F'|' '{print $8}')
  done
done
log end
