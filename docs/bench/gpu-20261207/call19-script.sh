#!/bin/bash
# Call 19 (the same warm machine): programmatic dependent launch off and on for the 1.5B Q4_K_M (dense)
# and the 2B hybrid Q4_K_M, pp512 and tg64, two rounds. Carry: .cuda-run.
. scripts/gpu-call.sh
$F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf > /dev/null 2>&1
for r in 1 2; do
  for m in q4 h2; do
    for p in 0 1; do
      FAK_CUDA_PDL=$p timeout 20 $F bench -m $M/$m.gguf --backend cuda -p 512 -n 64 -r 3 > $OUT/b-$m-$p-$r.txt 2>&1
      log $m pdl=$p r$r $(grep -E 'pp512|tg64' $OUT/b-$m-$p-$r.txt | awk -F'|' '{printf "%s;", $8}')
    done
  done
done
