#!/bin/bash
# Decode attention with a chunk's tiles side by side (AttentionDecodeKernel, default) against the tiles
# one after another (FAK_CUDA_ATTN_TILES=1), and the reworked whole-row kernel (FAK_CUDA_MATVEC_ROWS=1 on
# every shape, 0 on none): CUDA tests, kernel bench, per-kernel decode times under ncu, tg128 at
# 1.5B Q8_0 / Q4_K_M and 7B Q4_K_M in alternating rounds.
set -u
FINAL=${OUT:-/tmp/out}; OUT=$FINAL/raw; mkdir -p $OUT
P=$FINAL/progress.txt
trap 'tar -C $FINAL -czf $FINAL/raw.tgz raw && rm -rf $FINAL/raw' EXIT
trap 'exit 1' TERM INT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
log() { echo "$(date -u +%T) +$(el)s $*" >> $P; }
log start
scripts/test-cuda.sh unpack > $OUT/unpack.txt 2>&1 || log unpack-failed
mkdir -p tests/fixtures/hf && python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-fixtures/hf.tar.xz tests/fixtures/hf
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
export FAK_SYNTH_TOKENIZER=$PWD/.cuda-run/shared/fixtures/tokenizers/qwen3
F=$PWD/.cuda-run/bin/fak
T=$PWD/.cuda-run/bin/cuda_backend_test
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
cat $OUT/gpu.txt >> $P
M=/tmp/m; mkdir -p $M
( $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > $OUT/synth.txt 2>&1; echo done > $M/q8.done
  $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf >> $OUT/synth.txt 2>&1
  $F synth --geometry qwen2.5-7b --type q4_k_m -o $M/7b.gguf >> $OUT/synth.txt 2>&1; echo done > $M/small.done ) &
timeout 130 $T > $OUT/tests.txt 2>&1; log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|decode tiles|mode [0-9]|step [0-9]|differ' $OUT/tests.txt | head -16 >> $P
timeout 150 $F bench kernels --backend cuda --seconds 0.03 --rounds 1 --setting FAK_CUDA_MATVEC_ROWS=1 --setting FAK_CUDA_MATVEC_ROWS=0 > $OUT/kernels.txt 2>&1
log kernels rc=$?
head -1 $OUT/kernels.txt >> $P
tail -3 $OUT/kernels.txt | grep -i -E "bits|differ" >> $P
python3 - $OUT/kernels.txt >> $P <<'PY'
import sys,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    if not l.startswith('| ') or 'shape' in l: continue
    c=[x.strip() for x in l.strip().strip('|').split('|')]
    d[(c[0],c[1],c[3])].append(c[6])
keys=[]
for (s,t,x) in d:
    if (s,t) not in keys: keys.append((s,t))
for s,t in keys:
    print(s,t,' / '.join(' '.join(d[(s,t,x)]) for x in ['default','FAK_CUDA_MATVEC_ROWS=1','FAK_CUDA_MATVEC_ROWS=0']))
PY
while [ ! -f $M/q8.done ] && [ $(el) -lt 250 ]; do sleep 2; done
if command -v ncu > /dev/null; then
  for v in 4 1; do
    FAK_CUDA_ATTN_TILES=$v timeout 40 ncu --clock-control none --metrics gpu__time_duration.sum --launch-skip 2000 --launch-count 330 --csv $F bench batch -m $M/q8.gguf --backend cuda -p 128 -n 24 -b 1 > $OUT/ncu-q8-decode-tiles$v.csv 2> $OUT/ncu-q8-decode-tiles$v.err
    log ncu tiles$v rc=$?
    python3 - $OUT/ncu-q8-decode-tiles$v.csv >> $P <<'PY'
import csv,sys,collections
t=collections.defaultdict(float); n=collections.Counter()
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]
h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value')
for r in rows[1:]:
    k=r[ki].split('(')[0].split('<')[0].split('::')[-1]; t[k]+=float(r[vi].replace(',','')); n[k]+=1
tot=sum(t.values())
print(' '.join('%s:%d/%.1fus' % (k, n[k], t[k]/n[k]/1000) for k in sorted(t, key=lambda k:-t[k])), 'total %.0fus' % (tot/1000))
PY
  done
fi
while [ ! -f $M/small.done ] && [ $(el) -lt 300 ]; do sleep 2; done
log small-models-ready
for r in 1 2; do
  for v in X=0 FAK_CUDA_ATTN_TILES=1 FAK_CUDA_MATVEC_ROWS=1; do
    for m in q8 q4 7b; do
      [ $(el) -gt 430 ] && break 3
      env $v timeout 40 $F bench -m $M/$m.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/b-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'tg128' $OUT/b-$m-$v-r$r.txt | awk -F'|' '{printf "%s %s %s", $8, $9, $10}')
    done
  done
done
log end
