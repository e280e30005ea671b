#!/bin/bash
# The H100 call of 2026-12-06 (run from the repository root with .cuda-run/, .cuda-llama/ and
# .cuda-fixtures/ carried beside it; see scripts/test-cuda.sh pack): CUDA tests (tails on/off
# inside), greedy text tails on/off, tg128 A/B of the tails, CPU scaling at 16 threads against llama.cpp, ncu of a 1.5B decode step, 27B hybrid decode checks.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
P=$OUT/progress.txt
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
log() { echo "$(date -u +%T) +$(el)s $*" >> $P; }
log start
scripts/test-cuda.sh unpack > $OUT/unpack.txt 2>&1 || log unpack-failed
mkdir -p tests/fixtures/hf && python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-fixtures/hf.tar.xz tests/fixtures/hf
mkdir -p /tmp/lcpu && python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-llama/llama-cpu.tar.xz /tmp/lcpu
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
export FAK_SYNTH_TOKENIZER=$PWD/.cuda-run/shared/fixtures/tokenizers/qwen3
F=$PWD/.cuda-run/bin/fak
T=$PWD/.cuda-run/bin/cuda_backend_test
nvidia-smi > $OUT/nvidia-smi.txt 2>&1; lscpu > $OUT/lscpu.txt 2>&1
$F --version > $OUT/version.txt 2>&1
M=/tmp/m; mkdir -p $M
$F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > $OUT/synth.txt 2>&1
$F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf >> $OUT/synth.txt 2>&1
log synth-done
timeout 240 $T > $OUT/tests.txt 2>&1; log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|mode [0-9]|step [0-9]' $OUT/tests.txt | head -20 >> $P
for v in 0 1; do
  FAK_CUDA_TAILS=$v timeout 60 $F run -m $M/q8.gguf --backend cuda -n 96 --temp 0 -p "The history of the city begins" > $OUT/run-q8-tails$v.txt 2>/dev/null
  FAK_CUDA_TAILS=$v timeout 60 $F run -m $M/q4.gguf --backend cuda -n 96 --temp 0 -p "The history of the city begins" > $OUT/run-q4-tails$v.txt 2>/dev/null
done
cmp -s $OUT/run-q8-tails0.txt $OUT/run-q8-tails1.txt && log text-q8-same || log text-q8-DIFFERS
cmp -s $OUT/run-q4-tails0.txt $OUT/run-q4-tails1.txt && log text-q4-same || log text-q4-DIFFERS
for r in 1 2; do
  for v in 0 1 norm silu rope; do
    for m in q8 q4; do
      FAK_CUDA_TAILS=$v $F bench -m $M/$m.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/tg-$m-$v-r$r.txt 2>&1
      log tg $m tails=$v r$r $(grep -E 'tg128' $OUT/tg-$m-$v-r$r.txt | awk -F'|' '{print $8}')
    done
  done
done
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib:/tmp/lcpu/lib
FAK=$F FAK_BENCH_ROUNDS=3 FAK_BENCH_THREADS=16 timeout 150 scripts/bench-cpu-scaling.sh /tmp/lcpu/bin/llama-bench $M/q8.gguf $M/q4.gguf > $OUT/cpu-t16.txt 2>&1
log cpu16-done; grep -E '^\| Q' $OUT/cpu-t16.txt | head -8 >> $P
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
( $F synth --geometry qwen3.5-27b --type q4_k_m -o $M/27b.gguf > $OUT/synth27.txt 2>&1; echo done > $M/27b.done ) &
if command -v ncu > /dev/null; then
  for v in 0 1; do
    FAK_CUDA_TAILS=$v timeout 45 ncu --clock-control none --metrics gpu__time_duration.sum --launch-skip 3000 --launch-count 300 --csv $F bench batch -m $M/q8.gguf --backend cuda -p 128 -n 24 -b 1 > $OUT/ncu-q8-tails$v.csv 2> $OUT/ncu-q8-tails$v.err
    log ncu tails=$v rc=$?
  done
fi
while [ ! -f $M/27b.done ] && [ $(el) -lt 470 ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
if [ -f $M/27b.done ]; then
  for v in "FAK_CUDA_MATVEC_ROUNDS=1 FAK_CUDA_TAILS=0" "FAK_CUDA_TAILS=0" "FAK_CUDA_TAILS=1"; do
    [ $(el) -gt 540 ] && break
    env $v timeout 40 $F bench -m $M/27b.gguf --backend cuda -p 0 -n 32 -r 2 > "$OUT/27b-$v.txt" 2>&1
    log 27b "$v" $(grep -E 'tg32' "$OUT/27b-$v.txt" | awk -F'|' '{print $8, $10, $11}')
  done
  if [ $(el) -lt 530 ] && command -v ncu > /dev/null; then
    timeout $((585 - $(el))) ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum --launch-skip 2000 --launch-count 700 --csv $F bench batch -m $M/27b.gguf --backend cuda -p 16 -n 6 -b 1 > $OUT/ncu-27b.csv 2> $OUT/ncu-27b.err
    log ncu27 rc=$?
  fi
fi
log end
