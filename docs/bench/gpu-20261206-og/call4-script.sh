#!/bin/bash
# Call 4: 2cfda5d (SiLU groups by a block of 256 threads, a value each) against ee4eb5b ("prev": a warp per
# group, its loads ahead of its stores) and 01cce9e ("base"): the op tests of the changed kernels, greedy
# logits of the 1.5B Q4_K_M file against prev (the same bits expected), decode (tg128) of the 1.5B Q4_K_M
# and the 2B hybrid Q4_K_M files, the three binaries alternating, with no synthesis beside them.
set -u
FINAL=${OUT:-/tmp/out}; OUT=$FINAL/raw; mkdir -p $OUT
P=$FINAL/progress.txt
trap 'tar -C $FINAL -czf $FINAL/raw.tgz raw && rm -rf $FINAL/raw' EXIT
trap 'exit 1' TERM INT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
log() { echo "$(date -u +%T) +$(el)s $*" >> $P; }
log start
scripts/test-cuda.sh unpack > /dev/null 2>&1 || log unpack-failed
mkdir -p /tmp/base && python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-run/base.tar.xz /tmp/base
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
export FAK_SYNTH_TOKENIZER=$PWD/.cuda-run/shared/fixtures/tokenizers/qwen3
F=$PWD/.cuda-run/bin/fak
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >> $P; $F --version | head -1 >> $P
M=$(scripts/test-cuda.sh models-dir); mkdir -p $M
( $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1
  $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1; echo done > $M/h2.done ) &
timeout 60 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.Shadows*:CudaOps.NormRope*:CudaOps.MatMulEvery*' > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ' $OUT/tests.txt | head -20 >> $P
while [ ! -f $M/h2.done ] && [ $(el) -lt 100 ]; do sleep 1; done
PROMPT="The history of the city begins with a small settlement on the river, where traders from the north met farmers from the valley. Over the centuries it grew into a market town, then a fortified city with walls and gates, and finally the capital of a province."
for v in prev new; do
  bin=$F; [ $v = prev ] && bin=/tmp/base/fak-prev
  timeout 60 $bin run -m $M/q4.gguf --backend cuda -p "$PROMPT" -n 300 --ignore-eos --dump-logits $OUT/logits-$v.npy > $OUT/run-q4-$v.txt 2>&1
done
cmp -s $OUT/logits-prev.npy $OUT/logits-new.npy && log "q4 logits identical" || log "q4 logits DIFFER"
rm -f $OUT/logits-*.npy
for r in 1 2 3; do
  for m in q4 h2; do
    for v in new prev base; do
      [ $(el) -gt 150 ] && break 3
      bin=$F; [ $v = base ] && bin=/tmp/base/fak; [ $v = prev ] && bin=/tmp/base/fak-prev
      timeout 40 $bin bench -m $M/$m.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/b-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'tg128' $OUT/b-$m-$v-r$r.txt | awk -F'|' '{printf "%s %s;", $8, $9}')
    done
  done
done
log end
