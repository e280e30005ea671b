#!/bin/bash
# Call 3: the one-row products' bytes in flight. Two settings of the whole-row kernel (matvec_rows.cu):
# FAK_CUDA_MATVEC_AHEAD=N (a warp's rows prefetched to L2 N rows ahead; 1 is the previous behaviour)
# and FAK_CUDA_MATVEC_OCC=1 (one block more a multiprocessor: fewer registers a thread). The bit tests with
# both set and the whole-row kernel on every shape; the kernel bench at the model's short-row and output shapes, settings alternating; tg128
# of the 1.5B Q4_K_M / Q8_0 and 7B Q4_K_M files with each setting, alternating; ncu of the decode
# attention kernel (1.5B Q4_K_M).
set -u
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
M=$(scripts/test-cuda.sh models-dir); mkdir -p $M
( $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1
  $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > /dev/null 2>&1; echo done > $M/small.done
  $F synth --geometry qwen2.5-7b --type q4_k_m -o $M/q7.gguf > /dev/null 2>&1; echo done > $M/q7.done ) &
FILTER='CudaOps.MatMul*:CudaOps.LargeMatrix*:CudaOps.Shadows*:CudaModel.Decode*:CudaModel.KQuant*'
for s in "FAK_CUDA_MATVEC_AHEAD=4 FAK_CUDA_MATVEC_OCC=1 FAK_CUDA_MATVEC_ROWS=1"; do
  env $s timeout 90 .cuda-run/bin/cuda_backend_test --gtest_filter="$FILTER" > $OUT/tests-${#s}.txt 2>&1
  log "tests [$s] rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests-${#s}.txt | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure|Expected|Which is|differ|on the GPU' $OUT/tests-${#s}.txt | head -12 >> $P
done
SH="--shape 1.5b-qkv:1536+256+256x1536 --shape 1.5b-gate-up:8960+8960x1536 --shape 1.5b-output:151936x1536"
SH="$SH --shape 7b-gate-up:18944+18944x3584 --shape 7b-down:3584x18944 --shape 7b-output:152064x3584"
SH="$SH --shape 27b-gate-up:17408+17408x5120 --shape 27b-down:5120x17408"
ST="--setting FAK_CUDA_MATVEC_AHEAD=2 --setting FAK_CUDA_MATVEC_AHEAD=4 --setting FAK_CUDA_MATVEC_AHEAD=8"
ST="$ST --setting FAK_CUDA_MATVEC_OCC=1 --setting FAK_CUDA_MATVEC_OCC=1,FAK_CUDA_MATVEC_AHEAD=4"
timeout 150 $F bench kernels --backend cuda --batch 1 --seconds 0.05 --rounds 2 --type q4_k --type q6_k --type q8_0 $SH $ST > $OUT/kernels.txt 2>&1
log kernels rc=$?
while [ ! -f $M/q7.done ] && [ $(el) -lt 150 ]; do sleep 1; done
for r in 1 2; do
  [ $(el) -gt 280 ] && break
  for m in q4 q7 q8; do
    [ -f $M/$m.gguf ] || continue; [ $m = q7 ] && [ ! -f $M/q7.done ] && continue
    for v in 1,0 4,0 1,1 4,1; do
      [ $(el) -gt 300 ] && break 3
      a=${v%,*}; o=${v#*,}
      FAK_CUDA_MATVEC_AHEAD=$a FAK_CUDA_MATVEC_OCC=$o timeout 40 $F bench -m $M/$m.gguf --backend cuda -p 0 -n 128 -r 2 > $OUT/b-$m-a$a-o$o-r$r.txt 2>&1
      log $m ahead=$a occ=$o r$r $(grep -E 'tg128' $OUT/b-$m-a$a-o$o-r$r.txt | awk -F'|' '{printf "%s %s %s;", $8, $9, $10}')
    done
  done
done
if command -v ncu > /dev/null && [ $(el) -lt 240 ]; then
  timeout 60 ncu --clock-control none --kernel-name regex:AttentionMma --launch-skip 100 --launch-count 3 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats $F bench -m $M/q4.gguf --backend cuda -p 0 -n 16 -r 1 > $OUT/ncu-attn.txt 2>&1
  log ncu attention rc=$?
fi
log end
