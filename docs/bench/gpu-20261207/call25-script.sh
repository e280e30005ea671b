#!/bin/bash
# Call 25: 01f14dc, the attention gate and the DeltaNet output's gated norm writing the next product's
# int8 shadow (no quantize launch), against 45ff158 ("base", carried as .cuda-run/fak-base.xz):
#   - the CUDA op tests (the new shadow test among them) and the hybrid's alone-against-batch test;
#   - the 2B hybrid at Q4_K_M (shadows in groups of 256) and at Q8_0 (blocks of 32): greedy logits of
#     both binaries compared byte for byte (the change keeps every bit), then tg128 alternating;
#   - the kernel bench at batch 1 with FAK_CUDA_MATVEC_SPLIT=1 / 2 / 4 against the default rule at the
#     27B's and 2B's medium shapes (how many warps a row), and the 2B's tg128 under them;
#   - the 2B's pp512 with Q6_K GEMM tiles on four warps (default) and eight, on a quiet host;
#   - on an H200 only: the 27B hybrid Q4_K_M (synthesized from the start) against llama.cpp's CUDA build
#     (issue 13's prefill bar is for an H200), then the fleet burst of issue 11 if time is left.
# Carry: .cuda-run (with fak-base.xz), .cuda-llama, .cuda-fixtures (qwen35-tiny only, for the size limit).
LIMIT=${LIMIT:-470}
. scripts/gpu-call.sh
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
  .cuda-run/fak-base.xz .cuda-run/fak-base && chmod +x .cuda-run/fak-base
FB=$PWD/.cuda-run/fak-base
$FB --version | head -1 >> $P
H200=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -c H200)
B27=$M/qwen3.5-27b-q4_k_m.gguf
[ "$H200" = 1 ] && ( $F synth --geometry qwen3.5-27b --type q4_k_m -o $M/tmp27.gguf > $OUT/synth27.txt 2>&1 &&
  mv $M/tmp27.gguf $B27 ) &
( $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1
  $F synth --geometry qwen3.5-2b --type q8_0 -o $M/h2q8.gguf > /dev/null 2>&1; touch $M/small.done ) &
timeout 120 .cuda-run/bin/cuda_backend_test \
  --gtest_filter='CudaOps.*:CudaHost.*:CudaWeights.*:CudaBackend.*:CudaModel.HybridSequences*' > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ' $OUT/tests.txt | head -12 >> $P
SH="--shape 27b-out:5120x6144 --shape 27b-down:5120x17408 --shape 27b-dn-zab:6144+48+48x5120 --shape 27b-qg:12288x5120"
SH="$SH --shape 27b-dn-qkv:10240x5120 --shape 27b-v:2048x5120 --shape 27b-k:1024x5120 --shape 2b-down:2048x6144"
ST="--setting FAK_CUDA_MATVEC_SPLIT=1 --setting FAK_CUDA_MATVEC_SPLIT=2 --setting FAK_CUDA_MATVEC_SPLIT=4"
timeout 120 $F bench kernels --backend cuda --batch 1 --seconds 0.05 --rounds 2 --type q4_k --type q6_k $SH $ST \
  > $OUT/kernels-1.txt 2>&1
log kernels rc=$?; grep -iE 'differ|error' $OUT/kernels-1.txt | head -3 >> $P
while [ ! -f $M/small.done ] && [ $(el) -lt $((L - 60)) ]; do sleep 1; done
PROMPT="The history of the printing press begins"
for m in h2 h2q8; do
  for v in new base; do
    b=$([ $v = new ] && echo $F || echo $FB)
    timeout 30 $b run -m $M/$m.gguf --backend cuda -p "$PROMPT" -n 48 --ignore-eos --dump-logits $OUT/logits-$m-$v.npy \
      > $OUT/run-$m-$v.txt 2>&1
  done
  log bits $m $(cmp -s $OUT/logits-$m-new.npy $OUT/logits-$m-base.npy && echo same || echo DIFFER) \
    $(cmp -s $OUT/run-$m-new.txt $OUT/run-$m-base.txt && echo text-same || echo text-differs) \
    $(stat -c %s $OUT/logits-$m-new.npy)
done
rm -f $OUT/logits-*.npy
# tg128: new against base (2B Q4_K_M and Q8_0), and the warps-a-row settings on new.
for r in 1 2 3; do
  for m in h2 h2q8; do
    for v in new base; do
      [ $((r % 2)) = 0 ] && v=$([ $v = new ] && echo base || echo new)
      [ $(el) -gt $((L - 100)) ] && break 3
      b=$([ $v = new ] && echo $F || echo $FB)
      timeout 12 $b bench -m $M/$m.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/tg-$m-$v-r$r.txt 2>&1
      log $m $v r$r $(grep -E 'tg128' $OUT/tg-$m-$v-r$r.txt | awk -F'|' '{printf "%s;", $8}')
    done
  done
  for s in 1 4; do
    [ "$H200" = 1 ] && break
    FAK_CUDA_MATVEC_SPLIT=$s timeout 12 $F bench -m $M/h2.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/tg-h2-s$s-r$r.txt 2>&1
    log h2 split=$s r$r $(grep -E 'tg128' $OUT/tg-h2-s$s-r$r.txt | awk -F'|' '{printf "%s;", $8}')
  done
done
if [ "$H200" = 0 ]; then
  for r in 1 2 3; do
    for v in new w8; do
      [ $((r % 2)) = 0 ] && v=$([ $v = new ] && echo w8 || echo new)
      [ $(el) -gt $((L - 10)) ] && break 2
      env $([ $v = w8 ] && echo FAK_CUDA_GEMM_WARPS=8) timeout 8 $F bench -m $M/h2.gguf --backend cuda -p 512 -n 0 -r 3 > $OUT/pp-h2-$v-r$r.txt 2>&1
      log pp h2 $v r$r $(grep -E 'pp512' $OUT/pp-h2-$v-r$r.txt | awk -F'|' '{printf "%s;", $8}')
    done
  done
else
  llama_cuda
  while [ ! -f $B27 ] && [ $(el) -lt $((L - 100)) ]; do sleep 2; done
  log synth27 $(tail -1 $OUT/synth27.txt)
  if [ -f $B27 ]; then
    n=$(( (L - $(el) - 20) / 36 )); [ $n -gt 3 ] && n=3; [ $n -lt 1 ] && n=1
    OUT=$OUT/b27 GEOMETRIES=qwen3.5-27b TYPES=q4_k_m N=32 R=3 ROUNDS=$n timeout $((L - $(el) - 8)) scripts/bench-cuda.sh > $OUT/b27.txt 2>&1
    log b27 rc=$? rounds=$n; tail -4 $OUT/b27/summary.md >> $P
  fi
  rm -f $B27
  if [ $(el) -lt $((L - 70)) ]; then
    [ -f $M/q8.gguf ] || timeout 30 $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > /dev/null 2>&1
    timeout $((L - $(el) - 5)) $F bench fleet -m $M/q8.gguf --agents 32 --preamble 2048 --task 30 --gen 32 -t 16 --rounds 2 \
      --scenarios burst --serve-args "--backend cuda" --name h200 --out $OUT/fleet --report -q > $OUT/fleet.txt 2>&1
    log fleet rc=$? $(grep -h -E "^\| fak-serve \| [0-9]" $OUT/fleet/by-machine/*/*h200-burst/report.md 2>/dev/null | head -2 | tr '\n' ' ')
  fi
fi
log end
