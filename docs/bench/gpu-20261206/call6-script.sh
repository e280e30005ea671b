#!/bin/bash
# Rows of four pieces by two or four warps each in the whole-row kernel (FAK_CUDA_MATVEC_SPLIT), against
# the previous commit (base): CUDA tests, kernel bench over warps per row, tg128 at 1.5B Q8_0 / Q4_K_M
# and 7B Q4_K_M and tg32 at the 27B hybrid Q4_K_M in alternating rounds.
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
M=/tmp/m; mkdir -p $M
( $F synth --geometry qwen3.5-27b --type q4_k_m -o $M/27b.gguf > $OUT/synth27.txt 2>&1; echo done > $M/27b.done ) &
( $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > $OUT/synth.txt 2>&1
  $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf >> $OUT/synth.txt 2>&1
  $F synth --geometry qwen2.5-7b --type q4_k_m -o $M/7b.gguf >> $OUT/synth.txt 2>&1; echo done > $M/small.done ) &
timeout 100 $T > $OUT/tests.txt 2>&1; log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|mode [0-9]|step [0-9]|differ' $OUT/tests.txt | head -16 >> $P
S="--setting FAK_CUDA_MATVEC_ROWS=1,FAK_CUDA_MATVEC_SPLIT=1 --setting FAK_CUDA_MATVEC_ROWS=1,FAK_CUDA_MATVEC_SPLIT=2 --setting FAK_CUDA_MATVEC_ROWS=1,FAK_CUDA_MATVEC_SPLIT=4 --setting FAK_CUDA_MATVEC_ROWS=0"
timeout 120 $F bench kernels --backend cuda --seconds 0.03 --rounds 1 $S > $OUT/kernels.txt 2>&1
log kernels rc=$?
grep -c same $OUT/kernels.txt >> $P
grep "^|" $OUT/kernels.txt | grep -v -E "same|reference|shape|---" | head -5 >> $P
python3 - $OUT/kernels.txt >> $P <<'PY'
import sys,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    if not l.startswith('| ') or 'shape' in l: continue
    c=[x.strip() for x in l.strip().strip('|').split('|')]
    d[(c[0],c[1],c[3])].append(c[6])
keys=[]; sets=[]
for (s,t,x) in d:
    if (s,t) not in keys: keys.append((s,t))
    if x not in sets: sets.append(x)
print('arms:', ' | '.join(sets))
for s,t in keys:
    print(s, t, ' / '.join(' '.join(d[(s,t,x)]) for x in sets))
PY
while [ ! -f $M/small.done ] && [ $(el) -lt 200 ]; do sleep 2; done
log small-models-ready
for r in 1 2; do
  for v in new base; do
    for m in q8 q4 7b; do
      [ $(el) -gt 240 ] && break 3
      bin=$F; env="X=0"
      [ $v = base ] && bin=$B
      [ $v = old ] && env=FAK_CUDA_MATVEC_ROWS=0
      env $env timeout 40 $bin bench -m $M/$m.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/b-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'tg128' $OUT/b-$m-$v-r$r.txt | awk -F'|' '{printf "%s %s %s", $8, $9, $10}')
    done
  done
done
# Where a decode step's time goes: the previous commit's binary with ops left out (FAK_ABLATE, a build
# made for this measurement only; its tokens are meaningless, its step times are not).
A=/tmp/base/fak-ablate
for m in q8 7b; do
  for v in none attn norm rope silu attn,norm,rope,silu; do
    [ $(el) -gt 300 ] && break 2
    FAK_ABLATE=$v timeout 30 $A bench -m $M/$m.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/ablate-$m-$v.txt 2>&1
    log ablate $m $v $(grep -E 'tg128' $OUT/ablate-$m-$v.txt | awk -F'|' '{printf "%s %s %s", $8, $9, $10}')
  done
done
while [ ! -f $M/27b.done ] && [ $(el) -lt 330 ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
if [ -f $M/27b.done ]; then
  for v in new base; do
    [ $(el) -gt 390 ] && break
    bin=$F; env="X=0"
    [ $v = base ] && bin=$B
    [ $v = old ] && env=FAK_CUDA_MATVEC_ROWS=0
    env $env timeout 45 $bin bench -m $M/27b.gguf --backend cuda -p 0 -n 32 -r 2 > "$OUT/27b-$v-$(el).txt" 2>&1
    log 27b $v $(grep -E 'tg32' $OUT/27b-$v-*.txt | tail -1 | awk -F'|' '{print $8, $9, $10}')
  done
fi
log end
