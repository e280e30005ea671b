#!/bin/bash
# Call 27: the RMS norm in groups of 256 on a block per group for a few rows (a decode step's: a block
# per row left the norm on one multiprocessor), against 8ca0536 ("base", carried as .cuda-run/fak-base.xz):
# the CUDA op tests (a row's norm and shadow alone and in a batch among them), the 2B hybrid Q4_K_M's greedy
# logits of both binaries byte for byte, and its tg128 alternating. Carry: .cuda-run.
LIMIT=${LIMIT:-120}
. scripts/gpu-call.sh
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
  .cuda-run/fak-base.xz .cuda-run/fak-base && chmod +x .cuda-run/fak-base
FB=$PWD/.cuda-run/fak-base
$FB --version | head -1 >> $P
( $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1; touch $M/small.done ) &
timeout 60 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*' > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ' $OUT/tests.txt | head -12 >> $P
while [ ! -f $M/small.done ] && [ $(el) -lt $((L - 40)) ]; do sleep 1; done
PROMPT="The history of the printing press begins"
for v in new base; do
  b=$([ $v = new ] && echo $F || echo $FB)
  timeout 20 $b run -m $M/h2.gguf --backend cuda -p "$PROMPT" -n 48 --ignore-eos --dump-logits $OUT/logits-$v.npy \
    > $OUT/run-h2-$v.txt 2>&1
done
log bits $(cmp -s $OUT/logits-new.npy $OUT/logits-base.npy && echo same || echo DIFFER) $(stat -c %s $OUT/logits-new.npy)
rm -f $OUT/logits-*.npy
for r in 1 2 3 4 5 6; do
  for v in new base; do
    [ $((r % 2)) = 0 ] && v=$([ $v = new ] && echo base || echo new)
    [ $(el) -gt $((L - 5)) ] && break 2
    b=$([ $v = new ] && echo $F || echo $FB)
    timeout 10 $b bench -m $M/h2.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/tg-h2-$v-r$r.txt 2>&1
    log tg h2 $v r$r $(grep -E 'tg128' $OUT/tg-h2-$v-r$r.txt | awk -F'|' '{printf "%s;", $8}')
  done
done
log end
