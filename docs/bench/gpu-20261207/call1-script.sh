#!/bin/bash
# Call 1: the two CUDA changes not yet run on a GPU (834a87d: the K-quant RMS norm a warp per 256-value
# group; 23ae249: the delta rule's stage normalization) at HEAD ("new") against 70fb347 ("prev") and
# 01cce9e ("base"): every CUDA test, greedy continuations against prev (the bits change by design; the
# tokens are compared), decode (tg128) of the 1.5B and 7B Q4_K_M and the 2B hybrid Q4_K_M files and the
# hybrid's pp512, alternating; then the one-row products alone (bench kernels --batch 1), new against base.
set -u
FINAL=${OUT:-/tmp/out}; OUT=$FINAL/raw; mkdir -p $OUT
P=$FINAL/progress.txt
trap 'tar -C $FINAL -czf $FINAL/raw.tgz raw && rm -rf $FINAL/raw' EXIT
trap 'exit 1' TERM INT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
log() { echo "$(date -u +%T) +$(el)s $*" >> $P; }
log start
scripts/test-cuda.sh unpack > /dev/null 2>&1 || log unpack-failed
B=$PWD/.cuda-run/bin  # fak-prev and fak-base travel in the payload beside fak
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
export FAK_SYNTH_TOKENIZER=$PWD/.cuda-run/shared/fixtures/tokenizers/qwen3
F=$PWD/.cuda-run/bin/fak
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >> $P; $F --version | head -1 >> $P
M=$(scripts/test-cuda.sh models-dir); mkdir -p $M
( $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1; echo done > $M/q4.done
  $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1; echo done > $M/h2.done
  $F synth --geometry qwen2.5-7b --type q4_k_m -o $M/q7.gguf > /dev/null 2>&1; echo done > $M/q7.done ) &
timeout 150 .cuda-run/bin/cuda_backend_test > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ|cosine|agreement' $OUT/tests.txt | head -30 >> $P
while [ ! -f $M/h2.done ] && [ $(el) -lt 200 ]; do sleep 1; done
PROMPT="The history of the city begins with a small settlement on the river, where traders from the north met farmers from the valley. Over the centuries it grew into a market town, then a fortified city with walls and gates, and finally the capital of a province."
for m in q4 h2; do
  for v in prev new; do
    bin=$F; [ $v = prev ] && bin=$B/fak-prev
    timeout 60 $bin run -m $M/$m.gguf --backend cuda -p "$PROMPT" -n 300 --ignore-eos > $OUT/run-$m-$v.txt 2>/dev/null
  done
  cmp -s $OUT/run-$m-prev.txt $OUT/run-$m-new.txt && log "$m text identical" || log "$m text DIFFERS at byte $(cmp $OUT/run-$m-prev.txt $OUT/run-$m-new.txt | awk '{print $5}')"
done
for r in 1 2; do
  for m in q4 h2; do
    for v in new prev base; do
      bin=$F; [ $v = base ] && bin=$B/fak-base; [ $v = prev ] && bin=$B/fak-prev
      p=0; [ $m = h2 ] && p=512
      timeout 40 $bin bench -m $M/$m.gguf --backend cuda -p $p -n 128 -r 3 > $OUT/b-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'pp512|tg128' $OUT/b-$m-$v-r$r.txt | awk -F'|' '{printf "%s %s;", $8, $9}')
    done
  done
done
while [ ! -f $M/q7.done ] && [ $(el) -lt 300 ]; do sleep 1; done
for r in 1 2; do
  for v in new prev base; do
    [ -f $M/q7.done ] || break
    bin=$F; [ $v = base ] && bin=$B/fak-base; [ $v = prev ] && bin=$B/fak-prev
    timeout 40 $bin bench -m $M/q7.gguf --backend cuda -p 0 -n 128 -r 2 > $OUT/b-q7-$v-r$r.txt 2>&1
    log q7 $v r$r $(grep -E 'tg128' $OUT/b-q7-$v-r$r.txt | awk -F'|' '{printf "%s %s %s;", $8, $9, $10}')
  done
done
for v in new base; do
  [ $(el) -gt 480 ] && break
  bin=$F; [ $v = base ] && bin=$B/fak-base
  timeout 60 $bin bench kernels --backend cuda --batch 1 --type q4_k --type q6_k --type q8_0 > $OUT/k-$v.txt 2>&1
  log kernels $v rc=$?
done
log end
