#!/bin/bash
# Call 2: HEAD (01c7c4b, both changes of call 1 measured there) against llama.cpp 0c1e570's CUDA build in
# the same run: the 1.5B Q4_K_M and Q8_0 files (pp512, tg128), alternating, three rounds; the op-by-op
# decode profile of the 1.5B and 7B files; then the 27B hybrid geometry (all 64 layers) at Q4_K_M,
# synthesized during the 1.5B rounds: pp512 and tg32, fak and llama.cpp alternating, two rounds.
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
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
export FAK_SYNTH_TOKENIZER=$PWD/.cuda-run/shared/fixtures/tokenizers/qwen3
F=$PWD/.cuda-run/bin/fak
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader >> $P; $F --version | head -1 >> $P
M=$(scripts/test-cuda.sh models-dir); mkdir -p $M
( $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1
  $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > /dev/null 2>&1; echo done > $M/small.done
  $F synth --geometry qwen2.5-7b --type q4_k_m -o $M/q7.gguf > /dev/null 2>&1; echo done > $M/q7.done
  $F synth --geometry qwen3.5-27b --type q4_k_m -o $M/h27.gguf > $OUT/synth-27b.txt 2>&1; echo done > $M/h27.done ) &
while [ ! -f $M/small.done ] && [ $(el) -lt 100 ]; do sleep 1; done
log small models ready
for r in 1 2 3; do
  for m in q4 q8; do
    timeout 40 $F bench -m $M/$m.gguf --backend cuda -p 512 -n 128 -r 3 > $OUT/b-$m-fak-r$r.txt 2>&1
    log $m fak r$r $(grep -E 'pp512|tg128' $OUT/b-$m-fak-r$r.txt | awk -F'|' '{printf "%s %s;", $8, $9}')
    LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB timeout 60 $L -m $M/$m.gguf -ngl 99 -p 512 -n 128 -r 3 > $OUT/b-$m-llama-r$r.txt 2>&1
    log $m llama r$r $(grep -E 'pp512|tg128' $OUT/b-$m-llama-r$r.txt | awk -F'|' '{printf "%s;", $(NF-1)}')
  done
done
for m in q4 q8; do
  FAK_CUDA_PROFILE=1 FAK_LOG=debug timeout 30 $F bench -m $M/$m.gguf --backend cuda -p 64 -n 32 -r 1 > $OUT/prof-$m.txt 2>&1
done
while [ ! -f $M/q7.done ] && [ $(el) -lt 200 ]; do sleep 1; done
if [ -f $M/q7.done ]; then
  FAK_CUDA_PROFILE=1 FAK_LOG=debug timeout 40 $F bench -m $M/q7.gguf --backend cuda -p 64 -n 32 -r 1 > $OUT/prof-q7.txt 2>&1
  for r in 1 2; do
    timeout 40 $F bench -m $M/q7.gguf --backend cuda -p 512 -n 128 -r 2 > $OUT/b-q7-fak-r$r.txt 2>&1
    log q7 fak r$r $(grep -E 'pp512|tg128' $OUT/b-q7-fak-r$r.txt | awk -F'|' '{printf "%s %s %s;", $8, $9, $10}')
    LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB timeout 60 $L -m $M/q7.gguf -ngl 99 -p 512 -n 128 -r 2 > $OUT/b-q7-llama-r$r.txt 2>&1
    log q7 llama r$r $(grep -E 'pp512|tg128' $OUT/b-q7-llama-r$r.txt | awk -F'|' '{printf "%s;", $(NF-1)}')
  done
fi
while [ ! -f $M/h27.done ] && [ $(el) -lt 440 ]; do sleep 2; done
log 27b synth $(tail -1 $OUT/synth-27b.txt)
if [ -f $M/h27.done ]; then
  for r in 1 2; do
    [ $(el) -gt 530 ] && break
    timeout 60 $F bench -m $M/h27.gguf --backend cuda -p 512 -n 32 -r 2 > $OUT/b-h27-fak-r$r.txt 2>&1
    log h27 fak r$r $(grep -E 'pp512|tg32' $OUT/b-h27-fak-r$r.txt | awk -F'|' '{printf "%s %s %s;", $8, $9, $10}')
    [ $(el) -gt 540 ] && break
    LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB timeout 50 $L -m $M/h27.gguf -ngl 99 -p 512 -n 32 -r 2 > $OUT/b-h27-llama-r$r.txt 2>&1
    log h27 llama r$r $(grep -E 'pp512|tg32' $OUT/b-h27-llama-r$r.txt | awk -F'|' '{printf "%s;", $(NF-1)}')
  done
fi
log end
