# Call 6 (the same machine, warm): tg128 of the 1.5B Q4_K_M and Q8_0 files with the one-warp-a-row
# kernels' extra block a multiprocessor (FAK_CUDA_MATVEC_OCC=1, the knob of 76895f8) and without,
# alternating, four rounds.
scripts/test-cuda.sh unpack >/dev/null 2>&1; M=/dev/shm/fak-models; F=$PWD/.cuda-run/bin/fak; export LD_LIBRARY_PATH=$PWD/.cuda-run/lib; P=$OUT/p.txt; for r in 1 2 3 4; do for m in q4 q8; do for o in 0 1; do FAK_CUDA_MATVEC_OCC=$o $F bench -m $M/$m.gguf --backend cuda -p 0 -n 128 -r 3 > /tmp/b.txt 2>&1; cat /tmp/b.txt >> $OUT/raw.txt; echo "$m occ=$o r$r $(grep tg128 /tmp/b.txt | awk -F'|' '{printf "%s %s %s", $8,$9,$10}')" >> $P; done; done; done; cat $P
