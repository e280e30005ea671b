#!/bin/bash
# Call 25: the GEMM with its register form removed (the closed pieces' sum always in shared memory): the
# CUDA op tests. Then how many warps a row suits the 27B hybrid's medium one-row products (decode): the
# kernel bench at batch 1 with FAK_CUDA_MATVEC_SPLIT=1 / 2 / 4 against the default rule (four warps a
# row of four pieces when there are fewer rows than twice the resident warps) at the 27B's and the 2B's
# shapes, Q4_K and Q6_K; the 2B hybrid's pp512 with the GEMM's Q6_K on four and eight warps; its tg128 under the same settings, alternating; and on an H200 the
# fleet burst of issue 11 (1.5B Q8_0, 32 agents, a 2,048-token preamble). Carry: .cuda-run.
LIMIT=${LIMIT:-300}
. scripts/gpu-call.sh
( $F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1
  $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > /dev/null 2>&1 ) &
timeout 100 .cuda-run/bin/cuda_backend_test --gtest_filter='CudaOps.*' > $OUT/tests.txt 2>&1
log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|differ' $OUT/tests.txt | head -12 >> $P
SH="--shape 27b-out:5120x6144 --shape 27b-down:5120x17408 --shape 27b-dn-zab:6144+48+48x5120 --shape 27b-qg:12288x5120"
SH="$SH --shape 27b-dn-qkv:10240x5120 --shape 27b-v:2048x5120 --shape 27b-k:1024x5120 --shape 2b-down:2048x6144"
ST="--setting FAK_CUDA_MATVEC_SPLIT=1 --setting FAK_CUDA_MATVEC_SPLIT=2 --setting FAK_CUDA_MATVEC_SPLIT=4"
timeout 120 $F bench kernels --backend cuda --batch 1 --seconds 0.05 --rounds 2 --type q4_k --type q6_k $SH $ST \
  > $OUT/kernels-1.txt 2>&1
log kernels rc=$?; grep -iE 'differ|error' $OUT/kernels-1.txt | head -3 >> $P
wait
# The 2B hybrid's pp512 with Q6_K's rows of four pieces on four warps a GEMM tile (default) and on eight,
# alternating, on a quiet host (call 23's A/B ran beside the 27B's synthesis and leaned to the old form).
for r in 1 2 3; do
  for v in new w8; do
    [ $((r % 2)) = 0 ] && v=$([ $v = new ] && echo w8 || echo new)
    env $([ $v = w8 ] && echo FAK_CUDA_GEMM_WARPS=8) timeout 8 $F bench -m $M/h2.gguf --backend cuda -p 512 -n 0 -r 3 > $OUT/pp-h2-$v-r$r.txt 2>&1
    log h2 $v r$r $(grep -E 'pp512' $OUT/pp-h2-$v-r$r.txt | awk -F'|' '{printf "%s;", $8}')
  done
done
for r in 1 2 3; do
  for v in 0 1 4; do
    [ $(el) -gt $((L - 70)) ] && break 2
    env $([ $v != 0 ] && echo FAK_CUDA_MATVEC_SPLIT=$v) timeout 12 $F bench -m $M/h2.gguf --backend cuda -p 0 -n 128 -r 3 > $OUT/tg-h2-s$v-r$r.txt 2>&1
    log h2 split=$v r$r $(grep -E 'tg128' $OUT/tg-h2-s$v-r$r.txt | awk -F'|' '{printf "%s;", $8}')
  done
done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ $(el) -lt $((L - 60)) ]; then
  timeout $((L - $(el) - 5)) $F bench fleet -m $M/q8.gguf --agents 32 --preamble 2048 --task 30 --gen 32 -t 16 --rounds 2 \
    --scenarios burst --serve-args "--backend cuda" --name h200 --out $OUT/fleet --report -q > $OUT/fleet.txt 2>&1
  log fleet rc=$? $(grep -h -E "^\| fak-serve \| [0-9]" $OUT/fleet/by-machine/*/*h200-burst/report.md 2>/dev/null | head -2 | tr '\n' ' ')
fi
log end
