#!/bin/bash
# Call 18 (the same warm machine, the 2B file of call 17): pp512 with the two convolution kernels, each
# with programmatic dependent launch off and on, three rounds. Carry: .cuda-run.
. scripts/gpu-call.sh
for r in 1 2 3; do
  for v in 1 0; do
    for p in 0 1; do
      FAK_CUDA_PDL=$p FAK_CUDA_CONV_SERIAL=$v timeout 20 $F bench -m $M/h2.gguf --backend cuda -p 512 -n 0 -r 3 > $OUT/pp-$v-$p-$r.txt 2>&1
      log h2 serial=$v pdl=$p r$r $(grep pp512 $OUT/pp-$v-$p-$r.txt | awk -F'|' '{printf "%s;", $8}')
    done
  done
done
