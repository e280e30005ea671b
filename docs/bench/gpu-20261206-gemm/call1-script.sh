#!/bin/bash
# First GPU measurement of the GEMM (four/eight warps), decode attention and norm reworked on 3b50147..6868ec7:
# CUDA tests, kernel bench at 512 activation rows for both GEMM forms, pp512/tg128 at 1.5B Q8_0/Q4_K_M for
# the default, 4-warp, 8-warp forms and 3b50147's binary (base) in alternating rounds, then the 27B hybrid pp512.
set -u
FINAL=${OUT:-/tmp/out}; OUT=$FINAL/raw; mkdir -p $OUT
P=$FINAL/progress.txt
trap 'tar -C $FINAL -czf $FINAL/raw.tgz raw && rm -rf $FINAL/raw' EXIT
trap 'exit 1' TERM INT
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
$B --version | head -1 >> $P; $F --version | head -1 >> $P
M=/dev/shm/m; mkdir -p $M
( $F synth --geometry qwen3.5-27b --type q4_k_m -o $M/27b.gguf > $OUT/synth27.txt 2>&1; echo done > $M/27b.done ) &
( $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > $OUT/synth.txt 2>&1
  $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf >> $OUT/synth.txt 2>&1; echo done > $M/small.done ) &
timeout 150 $T > $OUT/tests.txt 2>&1; log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|mode |step [0-9]|differ' $OUT/tests.txt | head -20 >> $P
timeout 150 $F bench kernels --backend cuda --batch 512 --seconds 0.05 --rounds 2 --setting FAK_CUDA_GEMM_WARPS=4 --setting FAK_CUDA_GEMM_WARPS=8 > $OUT/kernels512.txt 2>&1
log kernels rc=$? same=$(grep -c same $OUT/kernels512.txt)
grep -E "^\|" $OUT/kernels512.txt | head -40 >> $P
while [ ! -f $M/small.done ] && [ $(el) -lt 300 ]; do sleep 2; done
log small-models-ready
for r in 1 2; do
  for m in q8 q4; do
    for v in new w4 w8 base; do
      [ $(el) -gt 380 ] && break 3
      bin=$F; env="X=0"
      [ $v = base ] && bin=$B
      [ $v = w4 ] && env=FAK_CUDA_GEMM_WARPS=4
      [ $v = w8 ] && env=FAK_CUDA_GEMM_WARPS=8
      env $env timeout 40 $bin bench -m $M/$m.gguf --backend cuda -p 512 -n 128 -r 3 > $OUT/b-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'pp512|tg128' $OUT/b-$m-$v-r$r.txt | awk -F'|' '{printf "%s %s %s;", $8, $9, $10}')
    done
  done
done
while [ ! -f $M/27b.done ] && [ $(el) -lt 420 ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
if [ -f $M/27b.done ]; then
  for v in new w4 base; do
    [ $(el) -gt 500 ] && break
    bin=$F; env="X=0"
    [ $v = base ] && bin=$B
    [ $v = w4 ] && env=FAK_CUDA_GEMM_WARPS=4
    env $env timeout 40 $bin bench -m $M/27b.gguf --backend cuda -p 512 -n 32 -r 2 > "$OUT/27b-$v.txt" 2>&1
    log 27b $v $(grep -E 'pp512|tg32' $OUT/27b-$v.txt | awk -F'|' '{printf "%s %s %s;", $8, $9, $10}')
  done
fi
log end
