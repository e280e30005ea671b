#!/bin/bash
# Call 17 (the machine of call 16, still warm): the 2B hybrid Q4_K_M's pp512 with the convolution's
# prompt kernel against the serial one, alternating which goes first, four rounds; then the op-by-op
# profile's convolution time under each. Carry: .cuda-run.
. scripts/gpu-call.sh
$F synth --geometry qwen3.5-2b --type q4_k_m -o $M/h2.gguf > /dev/null 2>&1
for r in 1 2 3 4; do
  for v in FAK_CUDA_CONV_SERIAL=1 FAK_CUDA_CONV_SERIAL=0; do
    [ $((r % 2)) = 0 ] && v=$([ $v = FAK_CUDA_CONV_SERIAL=1 ] && echo FAK_CUDA_CONV_SERIAL=0 || echo FAK_CUDA_CONV_SERIAL=1)
    env $v timeout 20 $F bench -m $M/h2.gguf --backend cuda -p 512 -n 0 -r 3 > $OUT/pp-$v-$r.txt 2>&1
    log h2 $v r$r $(grep pp512 $OUT/pp-$v-$r.txt | awk -F'|' '{printf "%s;", $8}')
  done
done
for v in 1 0; do
  FAK_CUDA_CONV_SERIAL=$v FAK_CUDA_PROFILE=1 FAK_LOG=debug timeout 20 $F bench -m $M/h2.gguf --backend cuda -p 512 -n 0 -r 1 2>&1 |
    grep -o "DeltaNetConv [0-9.]* ms x[0-9]*" | head -1 | sed "s/^/serial=$v /" >> $P
done
