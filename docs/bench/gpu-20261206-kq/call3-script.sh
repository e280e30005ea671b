#!/bin/bash
# One-row products that quantize their stale input while staging it (no separate launch for the
# attention output's 256-value groups in decode): the bit tests and the llama.cpp-output test, then 1.5B
# Q4_K_M and Q8_0 pp512/tg128 against the commit before the K-quant change (01cce9e, "base") and the
# K-quant change without this one (8dc0282, "kq"), alternating, three rounds.
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
  $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > /dev/null 2>&1; echo done > $M/small.done ) &
timeout 90 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.MatMul*:CudaOps.Large*:CudaOps.Tails*:CudaModel.KQuant*:CudaModel.Decode*' > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ|on the GPU|missing' $OUT/tests.txt | head -20 >> $P
while [ ! -f $M/small.done ] && [ $(el) -lt 150 ]; do sleep 1; done
for r in 1 2 3; do
  for m in q4 q8; do
    for v in new kq base; do
      [ $(el) -gt 200 ] && break 3
      bin=$F; [ $v = base ] && bin=/tmp/base/fak; [ $v = kq ] && bin=/tmp/base/fak-kq
      [ -x $bin ] || continue
      timeout 30 $bin bench -m $M/$m.gguf --backend cuda -p 512 -n 128 -r 3 > $OUT/b-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'pp512|tg128' $OUT/b-$m-$v-r$r.txt | awk -F'|' '{printf "%s %s;", $8, $9}')
    done
  done
done
log end
