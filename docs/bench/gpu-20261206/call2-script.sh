#!/bin/bash
# Kernel bench of the one-row products (default / fold / Q4_K halves / rounds 1) at 1.5B, 7B, 27B
# shapes; CUDA tests; ncu of the 27B gate/up Q4_K product per setting; tg128 A/B at 1.5B and 7B against
# the pre-tails binary; 27B decode per setting.
set -u
FINAL=${OUT:-/tmp/out}; OUT=$FINAL/raw; mkdir -p $OUT
P=$FINAL/progress.txt
trap 'tar -C $FINAL -czf $FINAL/raw.tgz raw && rm -rf $FINAL/raw' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
log() { echo "$(date -u +%T) +$(el)s $*" >> $P; }
log start
scripts/test-cuda.sh unpack > $OUT/unpack.txt 2>&1 || log unpack-failed
mkdir -p tests/fixtures/hf /tmp/base && python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-fixtures/hf.tar.xz tests/fixtures/hf
python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-run/base.tar.xz /tmp/base
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
export FAK_SYNTH_TOKENIZER=$PWD/.cuda-run/shared/fixtures/tokenizers/qwen3
F=$PWD/.cuda-run/bin/fak
B=/tmp/base/fak
T=$PWD/.cuda-run/bin/cuda_backend_test
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
cat $OUT/gpu.txt >> $P
M=/tmp/m; mkdir -p $M
( $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > $OUT/synth.txt 2>&1
  $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf >> $OUT/synth.txt 2>&1
  $F synth --geometry qwen2.5-7b --type q4_k_m -o $M/7b.gguf >> $OUT/synth.txt 2>&1; echo done > $M/small.done
  $F synth --geometry qwen3.5-27b --type q4_k_m -o $M/27b.gguf > $OUT/synth27.txt 2>&1; echo done > $M/27b.done ) &
S="--setting FAK_CUDA_MATVEC_STREAM=1 --setting FAK_CUDA_MATVEC_FOLD=1 --setting FAK_CUDA_Q4K_HALVES=1 --setting FAK_CUDA_Q4K_HALVES=1,FAK_CUDA_MATVEC_FOLD=1 --setting FAK_CUDA_MATVEC_ROUNDS=1"
timeout 150 $F bench kernels --backend cuda --seconds 0.08 --rounds 2 $S > $OUT/kernels.txt 2>&1
log kernels rc=$?
head -3 $OUT/kernels.txt >> $P
grep -E 'round|^\|' $OUT/kernels.txt | awk -F'|' '$6 ~ /2/ {printf "%s %s %s %s %s\n", $2, $3, $5, $8, $9}' >> $P
timeout 120 $T > $OUT/tests.txt 2>&1; log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|mode [0-9]|step [0-9]|differ' $OUT/tests.txt | head -12 >> $P
if command -v ncu > /dev/null; then
  for v in "X=0" "FAK_CUDA_MATVEC_STREAM=1" "FAK_CUDA_MATVEC_FOLD=1"; do
    env $v timeout 40 ncu --set full --launch-skip 3 --launch-count 1 $F bench kernels --backend cuda --type q4_k --shape 27b-gate-up:17408+17408x5120 --rounds 1 --seconds 0.01 > $OUT/ncu-$v.txt 2>&1
    log ncu $v rc=$? $(grep -E 'Duration|DRAM Throughput|Achieved Occupancy|Registers Per' $OUT/ncu-$v.txt | awk '{print $NF}' | tr '\n' ' ')
  done
fi
while [ ! -f $M/small.done ] && [ $(el) -lt 400 ]; do sleep 2; done
log small-models-ready
if command -v ncu > /dev/null; then
  timeout 60 ncu --set full -k regex:Attention --launch-skip 300 --launch-count 1 $F bench batch -m $M/q8.gguf --backend cuda -p 128 -n 24 -b 1 > $OUT/ncu-attention.txt 2>&1
  log ncu-attention rc=$? $(grep -E 'Duration|Registers Per|Achieved Occupancy' $OUT/ncu-attention.txt | awk '{print $NF}' | tr '\n' ' ')
fi
for r in 1 2; do
  for v in base 0 stream fold halves; do
    for m in q8 q4 7b; do
      [ $(el) -gt 430 ] && break 3
      bin=$F; env="X=0"
      [ $v = base ] && bin=$B
      [ $v = fold ] && env=FAK_CUDA_MATVEC_FOLD=1
      [ $v = halves ] && env=FAK_CUDA_Q4K_HALVES=1
      [ $v = stream ] && env=FAK_CUDA_MATVEC_STREAM=1
      [ $m = q8 ] && [ $v = halves ] && continue
      env $env timeout 40 $bin bench -m $M/$m.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/b-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'tg128' $OUT/b-$m-$v-r$r.txt | awk -F'|' '{printf "%s %s %s", $8, $9, $10}')
    done
  done
done
while [ ! -f $M/27b.done ] && [ $(el) -lt 470 ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
if [ -f $M/27b.done ]; then
  for v in "X=0" "FAK_CUDA_MATVEC_STREAM=1" "FAK_CUDA_MATVEC_FOLD=1" "FAK_CUDA_Q4K_HALVES=1"; do
    [ $(el) -gt 550 ] && break
    env $v timeout 40 $F bench -m $M/27b.gguf --backend cuda -p 0 -n 32 -r 2 > "$OUT/27b-$v.txt" 2>&1
    log 27b "$v" $(grep -E 'tg32' "$OUT/27b-$v.txt" | awk -F'|' '{print $8, $9, $10}')
  done
fi
log end
if [ $(el) -lt 520 ]; then
  FAK_CUDA_MATVEC_STREAM=1 timeout $((585 - $(el))) $T > $OUT/tests-stream.txt 2>&1; log tests-stream rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests-stream.txt | tr '\n' ' ')
  grep -E '^\[  FAILED' $OUT/tests-stream.txt | head -8 >> $P
fi
log end2
