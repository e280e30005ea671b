#!/bin/bash
# Call 28 (planned for the next GPU session, not yet run): the 27B hybrid with this round's decode
# changes, measured end to end against llama.cpp and against 45ff158 ("base": before the shadow-writing
# gate and gated norm and the warps-a-row rule), with the RMS norm on a block per group as a fourth arm
# (FAK_CUDA_NORM_SPREAD=1). While the host synthesizes the 27B file (~350 s on 16 threads): the CUDA op
# tests and the hybrid's alone-against-batch test, then call 27 (the spread norm's bits and the 2B
# hybrid's tg128 both ways). Then as many 27B rounds as fit (four arms, ~60 s a round) and a 27B decode
# step op by op. On an H200 the 27B pp512 against llama.cpp is issue 13's prefill bar.
# Make the pack (scripts/test-cuda.sh pack), add 45ff158's fak as .cuda-run/fak-base.xz if built, slim
# .cuda-fixtures/hf.tar.xz to qwen35-tiny and leave models/, tests/fixtures/hf and the two large
# docs/bench/gpu-20261206-* folders aside: carry .cuda-run, .cuda-llama, .cuda-fixtures (under 64 MiB).
LIMIT=${LIMIT:-590}
. scripts/gpu-call.sh
# The base arm only when its binary was carried (a CUDA build of 45ff158 in a second build tree: scripts/test-cuda.sh
# pack there, then `tar -xJOf .cuda-run/payload.tar.xz bin/fak | xz > fak-base.xz`).
FB=
if [ -f .cuda-run/fak-base.xz ]; then
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    .cuda-run/fak-base.xz .cuda-run/fak-base && chmod +x .cuda-run/fak-base && FB=$PWD/.cuda-run/fak-base
  $FB --version | head -1 >> $P
fi
B27=$M/qwen3.5-27b-q4_k_m.gguf
# What a kernel boundary costs against a grid barrier (launch_bench.cu), and two small 1.5B products beside it.
timeout 60 $F bench kernels --backend cuda --type q8_0 --type q4_k --shape 1.5b-o:1536x1536 \
  --shape 1.5b-qkv:1536+256+256x1536 --rounds 2 --seconds 0.1 > $OUT/launch.txt 2>&1
log launch rc=$? $(grep 'launch costs' $OUT/launch.txt | cut -c1-400)
( $F synth --geometry qwen3.5-27b --type q4_k_m -o $M/tmp27.gguf > $OUT/synth27.txt 2>&1 && mv $M/tmp27.gguf $B27 ) &
timeout 100 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*:CudaHost.*:CudaModel.HybridSequences*' \
  > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ' $OUT/tests.txt | head -12 >> $P
OUT=$OUT/call27 LIMIT=150 bash docs/bench/gpu-20261207/call27-script.sh > /dev/null 2>&1
tail -n +2 $OUT/call27/progress.txt >> $P 2>/dev/null
llama_cuda
while [ ! -f $B27 ] && [ $(el) -lt $((L - 130)) ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
if [ -f $B27 ]; then
  per=$([ -n "$FB" ] && echo 60 || echo 47)  # seconds a round: four arms or three
  n=$(( (L - $(el) - 60) / per )); [ $n -gt 3 ] && n=3; [ $n -lt 1 ] && n=1
  OUT=$OUT/b27 GEOMETRIES=qwen3.5-27b TYPES=q4_k_m N=32 R=3 VARIANTS="fak= spread=FAK_CUDA_NORM_SPREAD=1" BASE_FAK=$FB \
    ROUNDS=$n timeout $((L - $(el) - 40)) scripts/bench-cuda.sh > $OUT/b27.txt 2>&1
  log b27 rc=$? rounds=$n; tail -8 $OUT/b27/summary.md >> $P
  FAK_CUDA_PROFILE=1 FAK_LOG=debug timeout $((L - $(el) - 5)) $F bench -m $B27 --backend cuda -p 16 -n 6 -r 1 \
    > $OUT/prof-h27-tg.txt 2>&1
  log prof27 rc=$?; grep 'step of 1 rows' $OUT/prof-h27-tg.txt | tail -1 | cut -c1-1500 >> $P
  rm -f $B27
fi
log end
