#!/bin/bash
# Call 27 (not yet run): the RMS norm in groups of 256 on a block per group for a few rows
# (FAK_CUDA_NORM_SPREAD=1, off by default) against a block per row (the default): the CUDA op tests (a
# row's norm and shadow alone and in a batch among them), the 2B hybrid Q4_K_M's greedy logits under both
# byte for byte, and its tg128 alternating. Carry: .cuda-run. If it is faster, the default follows.
LIMIT=${LIMIT:-120}
. scripts/gpu-call.sh
( $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1; touch $M/small.done ) &
timeout 60 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*' > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ' $OUT/tests.txt | head -12 >> $P
while [ ! -f $M/small.done ] && [ $(el) -lt $((L - 40)) ]; do sleep 1; done
PROMPT="The history of the printing press begins"
for v in spread rows; do
  env $([ $v = spread ] && echo FAK_CUDA_NORM_SPREAD=1) timeout 20 $F run -m $M/h2.gguf --backend cuda -p "$PROMPT" -n 48 \
    --ignore-eos --dump-logits $OUT/logits-$v.npy > $OUT/run-h2-$v.txt 2>&1
done
log bits $(cmp -s $OUT/logits-spread.npy $OUT/logits-rows.npy && echo same || echo DIFFER) $(stat -c %s $OUT/logits-spread.npy)
rm -f $OUT/logits-*.npy
for r in 1 2 3 4 5 6; do
  for v in spread rows; do
    [ $((r % 2)) = 0 ] && v=$([ $v = spread ] && echo rows || echo spread)
    [ $(el) -gt $((L - 5)) ] && break 2
    env $([ $v = spread ] && echo FAK_CUDA_NORM_SPREAD=1) timeout 10 $F bench -m $M/h2.gguf --backend cuda -p 0 -n 128 -r 3 \
      > $OUT/tg-h2-$v-r$r.txt 2>&1
    log tg h2 $v r$r $(grep -E 'tg128' $OUT/tg-h2-$v-r$r.txt | awk -F'|' '{printf "%s;", $8}')
  done
done
log end
