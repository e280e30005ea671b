#!/bin/bash
# Call 4 (call 3's measurements, which did not run, with two more): the one-row products' bytes in
# flight (FAK_CUDA_MATVEC_AHEAD / FAK_CUDA_MATVEC_OCC, and the whole-row kernel's asynchronous form with
# 3 or 5 stages, FAK_CUDA_MATVEC_ASYNC: the bit tests, the kernel bench at the short-row and output
# shapes, tg128 of the 1.5B Q4_K_M and 7B Q4_K_M files under each setting, alternating, the 1.5B Q8_0
# in the first round); ncu of the decode attention kernel; then where a 27B hybrid prefill goes (the
# op-by-op profile of pp512, all 64 layers, Q4_K_M, synthesized here during the rest), and fak's prefill
# on the host CPU at 1 and 16 threads, alternating (the parallel-efficiency bar of the CPU scaling issue),
# and decode at 16 threads: the thread pool's new join against the previous binary, and llama.cpp.
# Carry: .cuda-run (scripts/test-cuda.sh pack, with bin/fak-prev added to its payload: fak built at
# 77fd97f, the commit before the thread pool's new join and the fused q/k/v products) and .llama-cpu (llama.cpp
# 0c1e570's CPU build with AVX-512 F/BW/VL/VNNI/BF16/VBMI and without AMX: llama-bench and the shared
# libraries it loads, in llama-cpu.tar.xz under llama/); tests/fixtures/hf and models/ stay behind (size).
set -u
L=${LIMIT:-560}  # seconds the whole script may take (the guards below scale with it)
FINAL=${OUT:-/tmp/out}; OUT=$FINAL/raw; mkdir -p $OUT
P=$FINAL/progress.txt
trap 'tar -C $FINAL -czf $FINAL/raw.tgz raw && rm -rf $FINAL/raw' EXIT
trap 'exit 1' TERM INT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
log() { echo "$(date -u +%T) +$(el)s $*" >> $P; }
log start
scripts/test-cuda.sh unpack > /dev/null 2>&1 || log unpack-failed
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
export FAK_SYNTH_TOKENIZER=$PWD/.cuda-run/shared/fixtures/tokenizers/qwen3
F=$PWD/.cuda-run/bin/fak
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >> $P; $F --version | head -1 >> $P
lscpu > $OUT/lscpu.txt 2>&1
M=$(scripts/test-cuda.sh models-dir); mkdir -p $M
( $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1
  $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > /dev/null 2>&1; echo done > $M/small.done
  $F synth --geometry qwen2.5-7b --type q4_k_m -o $M/q7.gguf > /dev/null 2>&1; echo done > $M/q7.done
  $F synth --geometry qwen3.5-27b --type q4_k_m -o $M/h27.gguf > $OUT/synth-27b.txt 2>&1; echo done > $M/h27.done ) &
SYN=$!
FILTER='CudaOps.MatMul*:CudaOps.LargeMatrix*:CudaOps.Shadows*:CudaModel.Decode*:CudaModel.KQuant*'
s="FAK_CUDA_MATVEC_AHEAD=4 FAK_CUDA_MATVEC_OCC=1 FAK_CUDA_MATVEC_ROWS=1"
env $s timeout 90 .cuda-run/bin/cuda_backend_test --gtest_filter="$FILTER" > $OUT/tests-knobs.txt 2>&1
log "tests [$s] rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests-knobs.txt | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is|differ|on the GPU' $OUT/tests-knobs.txt | head -12 >> $P
SH="--shape 1.5b-qkv:1536+256+256x1536 --shape 1.5b-gate-up:8960+8960x1536 --shape 1.5b-output:151936x1536"
SH="$SH --shape 7b-gate-up:18944+18944x3584 --shape 7b-down:3584x18944 --shape 7b-output:152064x3584"
SH="$SH --shape 27b-gate-up:17408+17408x5120 --shape 27b-down:5120x17408"
ST="--setting FAK_CUDA_MATVEC_AHEAD=2 --setting FAK_CUDA_MATVEC_AHEAD=4 --setting FAK_CUDA_MATVEC_AHEAD=8"
ST="$ST --setting FAK_CUDA_MATVEC_OCC=1 --setting FAK_CUDA_MATVEC_OCC=1,FAK_CUDA_MATVEC_AHEAD=4"
ST="$ST --setting FAK_CUDA_MATVEC_ASYNC=3 --setting FAK_CUDA_MATVEC_ASYNC=5"
timeout $((L * 25 / 100)) $F bench kernels --backend cuda --batch 1 --seconds 0.05 --rounds 2 --type q4_k --type q6_k --type q8_0 $SH $ST > $OUT/kernels.txt 2>&1
log kernels rc=$?
while [ ! -f $M/q7.done ] && [ $(el) -lt $((L * 27 / 100)) ]; do sleep 1; done
for r in 1 2; do
  [ $(el) -gt $((L * 48 / 100)) ] && break
  for m in q4 q7 q8; do
    [ -f $M/$m.gguf ] || continue; [ $m = q7 ] && [ ! -f $M/q7.done ] && continue
    [ $m = q8 ] && [ $r = 2 ] && continue
    for v in 1,0,0 4,0,0 1,1,0 1,0,3 1,0,5; do
      [ $(el) -gt $((L * 52 / 100)) ] && break 3
      a=${v%%,*}; o=${v#*,}; o=${o%,*}; y=${v##*,}
      FAK_CUDA_MATVEC_AHEAD=$a FAK_CUDA_MATVEC_OCC=$o FAK_CUDA_MATVEC_ASYNC=$y timeout 40 $F bench -m $M/$m.gguf --backend cuda -p 0 -n 128 -r 2 > $OUT/b-$m-a$a-o$o-s$y-r$r.txt 2>&1
      log $m ahead=$a occ=$o async=$y r$r $(grep -E 'tg128' $OUT/b-$m-a$a-o$o-s$y-r$r.txt | awk -F'|' '{printf "%s %s %s;", $8, $9, $10}')
    done
  done
done
if command -v ncu > /dev/null && [ $L -ge 540 ]; then
  timeout 50 ncu --clock-control none --kernel-name regex:AttentionMma --launch-skip 100 --launch-count 3 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats $F bench -m $M/q4.gguf --backend cuda -p 0 -n 16 -r 1 > $OUT/ncu-attn.txt 2>&1
  log ncu attention rc=$?
  # The whole-row product on the 7B file (gate/up and down at Q4_K, Q6_K rows): where its warps wait.
  [ -f $M/q7.done ] && timeout 45 ncu --clock-control none --kernel-name regex:MatVecRows --launch-skip 300 --launch-count 4 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats $F bench -m $M/q7.gguf --backend cuda -p 0 -n 8 -r 1 > $OUT/ncu-rows-q7.txt 2>&1
  log ncu rows rc=$?
fi
rm -f $M/q7.gguf
while [ ! -f $M/h27.done ] && [ $(el) -lt $((L - 110)) ]; do sleep 2; done
log 27b synth $(tail -1 $OUT/synth-27b.txt)
if [ -f $M/h27.done ]; then
  FAK_CUDA_PROFILE=1 FAK_LOG=debug timeout 60 $F bench -m $M/h27.gguf --backend cuda -p 512 -n 0 -r 2 > $OUT/prof-h27-pp512.txt 2>&1
  log h27 profile rc=$? $(grep -E 'pp512' $OUT/prof-h27-pp512.txt | awk -F'|' '{printf "%s %s;", $8, $9}')
  rm -f $M/h27.gguf
fi
kill $SYN 2> /dev/null; pkill -f 'synth --geometry'; sleep 1  # the CPU measurements below need the host to themselves
mkdir -p /tmp/lc && python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .llama-cpu/llama-cpu.tar.xz /tmp/lc
# The host CPU: the thread pool's join (fak-prev: the previous pool) at 16 threads, decode of the 1.5B
# Q4_K_M file by both binaries and llama.cpp's CPU build (AVX-512), alternating; then fak's prefill at
# 1 and 16 threads.
for r in 1 2; do
  for b in fak-prev fak llama; do
    [ $(el) -gt $((L - 60)) ] && break 2
    if [ $b = llama ]; then
      LD_LIBRARY_PATH=/tmp/lc/llama timeout 30 /tmp/lc/llama/llama-bench -m $M/q4.gguf -p 0 -n 64 -r 2 -t 16 > $OUT/cpu-tg-$b-r$r.txt 2>&1
      log cpu tg64 $b r$r $(grep -E 'tg64' $OUT/cpu-tg-$b-r$r.txt | awk -F'|' '{printf "%s;", $(NF-1)}')
      continue
    fi
    timeout 20 .cuda-run/bin/$b bench kernels -t 16 --type q8_0 --matmul-only --seconds 0.2 > $OUT/cpu-pool-$b-r$r.txt 2>&1
    timeout 30 .cuda-run/bin/$b bench -m $M/q4.gguf -p 0 -n 64 -r 2 -t 16 > $OUT/cpu-tg-$b-r$r.txt 2>&1
    log cpu $b r$r $(grep -E 'thread pool' $OUT/cpu-pool-$b-r$r.txt | cut -d: -f2) tg64 $(grep -E 'tg64' $OUT/cpu-tg-$b-r$r.txt | awk -F'|' '{printf "%s %s %s;", $8, $9, $10}')
  done
done
for r in 1 2; do
  for t in 1 16; do
    [ $(el) -gt $((L - 25)) ] && break 2
    timeout 30 $F bench -m $M/q4.gguf -p 256 -n 0 -r 1 -t $t > $OUT/cpu-q4-t$t-r$r.txt 2>&1
    log cpu q4 t$t r$r $(grep -E 'pp256' $OUT/cpu-q4-t$t-r$r.txt | awk -F'|' '{printf "%s %s;", $8, $9}')
  done
done
[ $(el) -lt $((L - 5)) ] && FAK_PROFILE=1 timeout 20 $F bench -m $M/q4.gguf -p 0 -n 32 -r 1 -t 16 > $OUT/cpu-prof-q4-tg-t16.txt 2>&1
log end
