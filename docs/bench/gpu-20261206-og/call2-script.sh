#!/bin/bash
# Call 2: the bias adds of split q/k/v products joined to them (the commit after 4e08ecc, "new"), 4e08ecc
# (the norm and SiLU that run as a product's tail write 256-value groups: "tails"; attention writes them
# since 250e639): the CUDA op tests and the llama.cpp-output test; greedy logits of 1.5B Q4_K_M / Q8_0
# and a 2B hybrid Q4_K_M against cf39cff's binary (kq: the same bits expected); 1.5B pp512/tg128 and the
# 2B hybrid's tg128, base (01cce9e) / kq / tails / new and llama.cpp 0c1e570 (CUDA) alternating, three
# rounds; a decode
# profile of new; the 7B Q4_K_M decode of kq and new if its synthesis is done in time.
set -u
FINAL=${OUT:-/tmp/out}; OUT=$FINAL/raw; mkdir -p $OUT
P=$FINAL/progress.txt
trap 'tar -C $FINAL -czf $FINAL/raw.tgz raw && rm -rf $FINAL/raw' EXIT
trap 'exit 1' TERM INT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
log() { echo "$(date -u +%T) +$(el)s $*" >> $P; }
log start
scripts/test-cuda.sh unpack > /dev/null 2>&1 || log unpack-failed
mkdir -p /tmp/ll && python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-llama/llama.tar.xz /tmp/ll
CUDALIB=$(dirname $(find /usr/local/cuda*/ /usr/lib -name 'libcublas.so*' 2>/dev/null | head -1))
L=/tmp/ll/llama/llama-bench
mkdir -p /tmp/base && python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-run/base.tar.xz /tmp/base
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
export FAK_SYNTH_TOKENIZER=$PWD/.cuda-run/shared/fixtures/tokenizers/qwen3
F=$PWD/.cuda-run/bin/fak
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >> $P; $F --version | head -1 >> $P
M=$(scripts/test-cuda.sh models-dir); mkdir -p $M
( $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1
  $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > /dev/null 2>&1; echo done > $M/small.done
  $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1; echo done > $M/h2.done
  $F synth --geometry qwen2.5-7b --type q4_k_m -o $M/q7.gguf > /dev/null 2>&1; echo done > $M/q7.done ) &
timeout 150 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*:CudaHost.*:CudaWeights.*:CudaModel.KQuant*' > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ|on the GPU|missing' $OUT/tests.txt | head -30 >> $P
while [ ! -f $M/h2.done ] && [ $(el) -lt 200 ]; do sleep 1; done
PROMPT="The history of the city begins with a small settlement on the river, where traders from the north met farmers from the valley. Over the centuries it grew into a market town, then a fortified city with walls and gates, and finally the capital of a province."
same() {  # model tag: greedy logits of kq and new, 300 generated positions (contexts past 256)
  for v in kq new; do
    bin=$F; [ $v = kq ] && bin=/tmp/base/fak-kq
    timeout 60 $bin run -m $M/$1.gguf --backend cuda -p "$PROMPT" -n 300 --ignore-eos --dump-logits $OUT/logits-$1-$v.npy > $OUT/run-$1-$v.txt 2>&1
  done
  if cmp -s $OUT/logits-$1-kq.npy $OUT/logits-$1-new.npy; then log "$1 logits identical ($(stat -c %s $OUT/logits-$1-new.npy) bytes)"; else log "$1 logits DIFFER"; cmp $OUT/logits-$1-kq.npy $OUT/logits-$1-new.npy | head -2 >> $P; fi
  rm -f $OUT/logits-$1-*.npy
}
same q4; same q8; same h2
for r in 1 2 3; do
  for m in q4 q8 h2; do
    for v in new tails kq base; do
      [ $(el) -gt 200 ] && break 3
      bin=$F; [ $v = base ] && bin=/tmp/base/fak; [ $v = kq ] && bin=/tmp/base/fak-kq; [ $v = tails ] && bin=/tmp/base/fak-tails
      args="-p 512 -n 128 -r 3"; [ $m = h2 ] && args="-p 0 -n 128 -r 3"
      timeout 40 $bin bench -m $M/$m.gguf --backend cuda $args > $OUT/b-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'pp512|tg128' $OUT/b-$m-$v-r$r.txt | awk -F'|' '{printf "%s %s;", $8, $9}')
    done
    if [ $m != h2 ]; then
      LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB timeout 60 $L -m $M/$m.gguf -ngl 99 -p 512 -n 128 -r 3 > $OUT/b-$m-llama-r$r.txt 2>&1
      log $m llama r$r $(grep -E 'pp512|tg128' $OUT/b-$m-llama-r$r.txt | awk -F'|' '{printf "%s;", $(NF-1)}')
    fi
  done
done
FAK_CUDA_PROFILE=1 FAK_LOG=debug timeout 30 $F bench -m $M/q4.gguf --backend cuda -p 64 -n 32 -r 1 > $OUT/prof-q4-new.txt 2>&1
log profile $(grep 'step of 1 rows' $OUT/prof-q4-new.txt | tail -1 | grep -o -E '(Quantize|AddRow) [^|]*' | tr '\n' ' ')
while [ ! -f $M/q7.done ] && [ $(el) -lt 230 ]; do sleep 1; done
if [ -f $M/q7.done ]; then
  for v in new kq new kq; do
    bin=$F; [ $v = kq ] && bin=/tmp/base/fak-kq
    timeout 40 $bin bench -m $M/q7.gguf --backend cuda -p 0 -n 128 -r 2 > $OUT/b-q7-$v.txt 2>&1
    log q7 $v $(grep -E 'tg128' $OUT/b-q7-$v.txt | awk -F'|' '{printf "%s %s %s;", $8, $9, $10}')
  done
fi
log end
