#!/bin/bash
# Call 14: where the tensor-core GEMM's time goes at 512 activation rows (the prefill shapes of the 27B
# hybrid and the 1.5B): the kernel bench at batch 512 for Q4_K, Q6_K and Q8_0, then ncu of one launch
# each (warp states, scheduler, instruction mix, source counters), and the per-instruction stall samples
# of the Q4_K kernel (the source page of a full report). Carry: .cuda-run (scripts/test-cuda.sh pack).
set -u
FINAL=${OUT:-/tmp/out}; OUT=$FINAL/raw; mkdir -p $OUT
P=$FINAL/progress.txt
trap 'tar -C $FINAL -czf $FINAL/raw.tgz raw && rm -rf $FINAL/raw' EXIT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
log() { echo "$(date -u +%T) +$(el)s $*" >> $P; }
log start
scripts/test-cuda.sh unpack > /dev/null 2>&1 || log unpack-failed
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
F=$PWD/.cuda-run/bin/fak
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader >> $P; $F --version | head -1 >> $P
SH="--shape 27b-gate-up:17408+17408x5120 --shape 27b-down:5120x17408 --shape 27b-out:5120x6144"
SH="$SH --shape 1.5b-gate-up:8960+8960x1536 --shape 1.5b-down:1536x8960 --shape 1.5b-qkv:1536+256+256x1536"
timeout 150 $F bench kernels --backend cuda --batch 512 --seconds 0.1 --rounds 2 --type q4_k --type q6_k --type q8_0 $SH > $OUT/kernels-512.txt 2>&1
log kernels rc=$?
NS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section InstructionStats --section ComputeWorkloadAnalysis --section LaunchStats --section SourceCounters --section MemoryWorkloadAnalysis"
for t in q4_k:27b-gate-up:17408+17408x5120 q6_k:27b-down:5120x17408 q8_0:1.5b-gate-up:8960+8960x1536; do
  ty=${t%%:*}; s=${t#*:}
  timeout 60 ncu --clock-control none --kernel-name regex:GemmKernel --launch-skip 3 --launch-count 1 $NS $F bench kernels --backend cuda --batch 512 --seconds 0.01 --rounds 1 --type $ty --shape $s > $OUT/ncu-$ty.txt 2>&1
  log ncu $ty rc=$?
done
timeout 90 ncu --clock-control none --kernel-name regex:GemmKernel --launch-skip 3 --launch-count 1 --set full --import-source no -o $OUT/q4k -f $F bench kernels --backend cuda --batch 512 --seconds 0.01 --rounds 1 --type q4_k --shape 27b-gate-up:17408+17408x5120 > $OUT/ncu-full-q4k.log 2>&1
log ncu full rc=$?
timeout 60 ncu --import $OUT/q4k.ncu-rep --page source --csv --print-source sass > $OUT/q4k-source.csv 2>&1
log source rc=$? $(wc -c < $OUT/q4k-source.csv)
rm -f $OUT/q4k.ncu-rep
log end
