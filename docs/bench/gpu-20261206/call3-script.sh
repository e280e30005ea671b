#!/bin/bash
# The whole-row matrix-vector kernel (matvec_rows.cu, default) against the previous kernel
# (FAK_CUDA_MATVEC_ROWS=0): kernel bench with bit checks, CUDA tests, ncu of the 27B gate/up Q4_K
# product, tg128 at 1.5B Q8_0 / Q4_K_M and 7B Q4_K_M against the pre-tails binary, 27B decode.
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
M=/tmp/m; mkdir -p $M
( $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > $OUT/synth.txt 2>&1
  $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf >> $OUT/synth.txt 2>&1
  $F synth --geometry qwen2.5-7b --type q4_k_m -o $M/7b.gguf >> $OUT/synth.txt 2>&1; echo done > $M/small.done ) &
timeout 150 $F bench kernels --backend cuda --seconds 0.03 --rounds 1 --setting FAK_CUDA_MATVEC_ROWS=0 > $OUT/kernels.txt 2>&1
log kernels rc=$?
head -1 $OUT/kernels.txt >> $P
tail -2 $OUT/kernels.txt | grep -i bits >> $P
python3 - $OUT/kernels.txt >> $P <<'PY'
import sys,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    if not l.startswith('| ') or 'shape' in l: continue
    c=[x.strip() for x in l.strip().strip('|').split('|')]
    d[(c[0],c[1],c[3])].append(c[6]+'/'+c[8])
keys=[]
for (s,t,x) in d:
    if (s,t) not in keys: keys.append((s,t))
for s,t in keys:
    print(s,t,' '.join(' '.join(d[(s,t,x)]) for x in ['default','FAK_CUDA_MATVEC_ROWS=0','FAK_CUDA_MATVEC_ROWS=0,FAK_CUDA_MATVEC_ROUNDS=1']))
PY
timeout 100 $T > $OUT/tests.txt 2>&1; log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|mode [0-9]|step [0-9]|differ' $OUT/tests.txt | head -12 >> $P
while [ ! -f $M/small.done ] && [ $(el) -lt 300 ]; do sleep 2; done
log small-models-ready
for r in 1; do
  for v in rows old; do
    for m in q8 q4 7b; do
      [ $(el) -gt 150 ] && break 3
      bin=$F; env="X=0"
      [ $v = base ] && bin=$B
      [ $v = old ] && env=FAK_CUDA_MATVEC_ROWS=0
      env $env timeout 40 $bin bench -m $M/$m.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/b-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'tg128' $OUT/b-$m-$v-r$r.txt | awk -F'|' '{printf "%s %s %s", $8, $9, $10}')
    done
  done
done
if command -v ncu > /dev/null && [ $(el) -lt 0 ]; then
  timeout 45 ncu --clock-control none --metrics gpu__time_duration.sum --launch-skip 3000 --launch-count 300 --csv $F bench batch -m $M/q8.gguf --backend cuda -p 128 -n 24 -b 1 > $OUT/ncu-q8-decode.csv 2> $OUT/ncu-q8-decode.err
  log ncu-decode rc=$?
fi
if command -v ncu > /dev/null; then
  timeout 25 ncu --set full --launch-skip 3 --launch-count 1 $F bench kernels --backend cuda --type q4_k --shape 27b-gate-up:17408+17408x5120 --rounds 1 --seconds 0.01 > $OUT/ncu-rows-27b-gate-up-q4k.txt 2>&1
  log ncu rc=$? $(grep -E 'Duration|DRAM Throughput|Issue Slots Busy|Registers Per|Achieved Occupancy' $OUT/ncu-rows-27b-gate-up-q4k.txt | awk '{print $NF}' | tr '\n' ' ')
fi
while [ ! -f $M/27b.done ] && [ $(el) -lt 0 ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
if [ -f $M/27b.done ]; then
  for v in "X=0" "FAK_CUDA_MATVEC_ROWS=0" "X=1"; do
    [ $(el) -gt 340 ] && break
    env $v timeout 40 $F bench -m $M/27b.gguf --backend cuda -p 0 -n 32 -r 2 > "$OUT/27b-$v.txt" 2>&1
    log 27b "$v" $(grep -E 'tg32' "$OUT/27b-$v.txt" | awk -F'|' '{print $8, $9, $10}')
  done
fi
log end
