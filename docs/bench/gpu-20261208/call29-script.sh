#!/bin/bash
# Call 29: the CPU scaling issue's measurement of call 13 once more (docs/bench/cpu-scaling.md), as many
# rounds as fit in the call, and a 16-thread profile of each file's prefill (`FAK_PROFILE=1`) to show
# where the time goes now. Each round: the read bandwidth and the register-only int8 loop on one thread
# and on 16, then per file fak and llama.cpp's AVX-512 CPU build at 16 threads (pp256, tg64) and on one
# thread (pp256). Carry: .cuda-run (scripts/test-cuda.sh pack) and .llama-cpu (llama-cpu.tar.xz).
LIMIT=${LIMIT:-560}
. scripts/gpu-call.sh
for m in q8:q8_0 q4:q4_k_m; do
  [ -f $M/${m%%:*}.gguf ] || $F synth --geometry qwen2.5-1.5b --type ${m#*:} -o $M/${m%%:*}.gguf > /dev/null 2>&1
done
log synth done
mkdir -p /tmp/lc && python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .llama-cpu/llama-cpu.tar.xz /tmp/lc
LC=/tmp/lc/llama
# The previous CPU engine as a control arm when carried (.cuda-run/fak-base.xz, a build from before the
# shared q/k/v quantization and the AVX2 quantizers; its AVX-512 path differs from this one's only there).
FB=
if [ -f .cuda-run/fak-base.xz ]; then
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    .cuda-run/fak-base.xz .cuda-run/fak-base && chmod +x .cuda-run/fak-base && FB=$PWD/.cuda-run/fak-base
  $FB --version | head -1 >> $P
fi
for m in q8 q4; do
  FAK_PROFILE=1 $F bench -m $M/$m.gguf -p 256 -n 0 -r 1 -t 16 > $OUT/prof16-$m.txt 2>&1
  log profile $m $(grep -E 'pp256' $OUT/prof16-$m.txt | awk -F'|' '{print $8}')
done
for r in 1 2 3 4 5 6; do
  for t in 1 16; do
    [ $(el) -gt $((L - 70)) ] && break 2
    $F bench kernels -t $t --type q8_0 $([ $t = 16 ] || echo --matmul-only) --seconds 0.3 > $OUT/kern$t-r$r.txt 2>&1
    log kernels t$t r$r $(grep -E 'read bandwidth|int8 peak|thread pool' $OUT/kern$t-r$r.txt | cut -c1-90 | tr '\n' ' ')
  done
  for m in q8 q4; do
    [ $(el) -gt $((L - 50)) ] && break 2
    $F bench -m $M/$m.gguf -p 256 -n 64 -r 2 -t 16 > $OUT/fak-$m-r$r.txt 2>&1
    log fak $m t16 r$r $(grep -E 'pp256|tg64' $OUT/fak-$m-r$r.txt | awk -F'|' '{printf "%s %s %s;", $7, $8, $9}')
    if [ -n "$FB" ]; then
      $FB bench -m $M/$m.gguf -p 256 -n 64 -r 2 -t 16 > $OUT/base-$m-r$r.txt 2>&1
      log base $m t16 r$r $(grep -E 'pp256|tg64' $OUT/base-$m-r$r.txt | awk -F'|' '{printf "%s %s %s;", $7, $8, $9}')
    fi
    LD_LIBRARY_PATH=$LC timeout 60 $LC/llama-bench -m $M/$m.gguf -p 256 -n 64 -r 2 -t 16 > $OUT/llama-$m-r$r.txt 2>&1
    log llama $m t16 r$r $(grep -E 'pp256|tg64' $OUT/llama-$m-r$r.txt | awk -F'|' '{printf "%s;", $(NF-1)}')
    $F bench -m $M/$m.gguf -p 256 -n 0 -r 1 -t 1 > $OUT/fak1-$m-r$r.txt 2>&1
    log fak $m t1 r$r $(grep pp256 $OUT/fak1-$m-r$r.txt | awk -F'|' '{print $8}')
    LD_LIBRARY_PATH=$LC timeout 60 $LC/llama-bench -m $M/$m.gguf -p 256 -n 0 -r 1 -t 1 > $OUT/llama1-$m-r$r.txt 2>&1
    log llama $m t1 r$r $(grep pp256 $OUT/llama1-$m-r$r.txt | awk -F'|' '{print $(NF-1)}')
  done
done
log end
