#!/bin/bash
# The attention kernels and the RMS norm writing 256-value shadow groups themselves (no quantize launch
# before the output projection of a K-quant model): the CUDA op tests (the new ShadowsInGroupsOf256AreTheQuantizeKernels
# among them) and the llama.cpp-output test; the logits of 1.5B Q4_K_M / Q8_0 and a 2B hybrid Q4_K_M
# greedy runs against the previous commit's binary (kq: the same bits are expected); then decode and
# prefill at the 1.5B geometry, base (01cce9e) / kq (cf39cff) / new, alternating, three rounds; a
# per-op decode profile of kq and new.
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
  $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > /dev/null 2>&1; echo done > $M/small.done
  $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1; echo done > $M/h2.done ) &
timeout 150 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*:CudaHost.*:CudaWeights.*:CudaModel.KQuant*:CudaModel.ExpertModels*' > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ|on the GPU|missing' $OUT/tests.txt | head -30 >> $P
while [ ! -f $M/small.done ] && [ $(el) -lt 200 ]; do sleep 1; done
PROMPT="The history of the city begins with a small settlement on the river, where traders from the north met farmers from the valley. Over the centuries it grew into a market town, then a fortified city with walls and gates, and finally the capital of a province."
same() {  # model tag: greedy logits of kq and new, 300 generated positions (contexts past 256)
  for v in kq new; do
    bin=$F; [ $v = kq ] && bin=/tmp/base/fak-kq
    timeout 60 $bin run -m $M/$1.gguf --backend cuda -p "$PROMPT" -n 300 --ignore-eos --dump-logits $OUT/logits-$1-$v.npy > $OUT/run-$1-$v.txt 2>&1
  done
  if cmp -s $OUT/logits-$1-kq.npy $OUT/logits-$1-new.npy; then log "$1 logits identical ($(stat -c %s $OUT/logits-$1-new.npy) bytes)"; else log "$1 logits DIFFER"; cmp $OUT/logits-$1-kq.npy $OUT/logits-$1-new.npy | head -2 >> $P; fi
  rm -f $OUT/logits-$1-*.npy
}
same q4; same q8
for r in 1 2 3; do
  for m in q4 q8; do
    for v in new kq base; do
      [ $(el) -gt 330 ] && break 3
      bin=$F; [ $v = base ] && bin=/tmp/base/fak; [ $v = kq ] && bin=/tmp/base/fak-kq
      timeout 30 $bin bench -m $M/$m.gguf --backend cuda -p 512 -n 128 -r 3 > $OUT/b-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'pp512|tg128' $OUT/b-$m-$v-r$r.txt | awk -F'|' '{printf "%s %s;", $8, $9}')
    done
  done
done
for v in kq new; do
  bin=$F; [ $v = kq ] && bin=/tmp/base/fak-kq
  FAK_CUDA_PROFILE=1 FAK_LOG=debug timeout 30 $bin bench -m $M/q4.gguf --backend cuda -p 64 -n 32 -r 1 > $OUT/prof-q4-$v.txt 2>&1
done
log profiles done
while [ ! -f $M/h2.done ] && [ $(el) -lt 380 ]; do sleep 1; done
[ -f $M/h2.done ] && same h2
log end
