#!/usr/bin/env bash
# The CUDA backend's tests and benchmarks, for a machine with an NVIDIA GPU (docs/bench/gpu.md).
#
#   scripts/test-cuda.sh pack   on the build machine: builds (in $FAK_CUDA_BUILD, default build/), then
#                               gathers into .cuda-run/ the fak
#                               binary, the CUDA test binary, the shared libraries they load that a bare
#                               GPU machine lacks, and the llama.cpp fixtures the tests read; and into
#                               .cuda-fixtures/ the HF fixtures (send both, and leave tests/fixtures/hf
#                               and models/ out of the tree that travels: it has a size limit).
#   scripts/test-cuda.sh unpack on the GPU machine: unpacks .cuda-run/ (run does it first).
#   scripts/test-cuda.sh models-dir  where models are synthesized ($MODELS, /dev/shm, /tmp).
#   scripts/test-cuda.sh run    on the GPU machine, from the repository root (with .cuda-run/ beside):
#                               the consistency harness and model tests, then decode and prefill
#                               benchmarks on models synthesized there; results under $OUT (default
#                               build/cuda-results).
# Elsewhere the CUDA tests run in the ordinary ctest and report themselves skipped ("skipped: no GPU").
set -uo pipefail
cd "$(dirname "$0")/.."
pack=.cuda-run
case "${1:-}" in
  pack)
    build=${FAK_CUDA_BUILD:-build}  # a build tree configured with the CUDA backend
    ninja -C "$build" fak cuda_backend_test || exit 1
    rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib" "$pack/shared/fixtures/llamacpp-tiny"
    cp "$build/apps/fak/fak" "$build/backends/cuda/cuda_backend_test" "$pack/bin/"
    strip -s "$pack"/bin/*  # the working tree that travels to the GPU machine is limited in size
    for bin in "$build/apps/fak/fak" "$build/backends/cuda/cuda_backend_test"; do
      ldd "$bin" | awk '$3 ~ /^\// {print $3}'
    done | sort -u | grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' | xargs -r cp -L -t "$pack/lib/"
    # Binaries and libraries travel as one xz archive (unpacked there by python3, which that machine has).
    tar -C "$pack" -cf - bin lib | xz -9 -T2 > "$pack/payload.tar.xz" && rm -rf "$pack/bin" "$pack/lib"
    cp ../shared/fixtures/llamacpp-tiny/tiny-llama-q4_k_m.gguf "$pack/shared/fixtures/llamacpp-tiny/"
    # The Q6_K file (compressed to travel) and llama.cpp's outputs for both K-quant files.
    xz -6 -T2 -c ../shared/fixtures/llamacpp-tiny/tiny-llama-q6_k.gguf > "$pack/shared/fixtures/llamacpp-tiny/tiny-llama-q6_k.gguf.xz"
    mkdir -p "$pack/shared/fixtures/llamacpp-tiny/expected"
    cp ../shared/fixtures/llamacpp-tiny/expected/{q4_k_m,q6_k}-p* "$pack/shared/fixtures/llamacpp-tiny/expected/"
    mkdir -p "$pack/shared/fixtures/tokenizers/qwen3"  # for fak synth there, compressed to travel
    gzip -9 -c ../shared/fixtures/tokenizers/qwen3/tokenizer.json > "$pack/shared/fixtures/tokenizers/qwen3/tokenizer.json.gz"
    cp ../shared/fixtures/tokenizers/qwen3/tokenizer_config.json "$pack/shared/fixtures/tokenizers/qwen3/"
    grep -qxF "/$pack/" .git/info/exclude 2>/dev/null || echo "/$pack/" >> .git/info/exclude
    # The HF oracle fixtures the model tests read (configs, weights, oracle.json: not the .npy dumps),
    # for a working tree sent without tests/fixtures/hf and models/ (the tracked tree with them is over
    # the 64 MiB a GPU run may carry): `unpack` puts them back where they are missing.
    # Made only from a checkout that has them, through a temporary file, so a pack run while they are set
    # aside (to keep the tree that travels small) keeps the archive made before.
    mkdir -p .cuda-fixtures
    if [ -f tests/fixtures/hf/README.md ]; then
      tar -C tests/fixtures/hf --exclude='*.npy' -cf - . | xz -6 -T2 > .cuda-fixtures/hf.tar.xz.tmp &&
        mv .cuda-fixtures/hf.tar.xz.tmp .cuda-fixtures/hf.tar.xz || exit 1
    fi
    grep -qxF "/.cuda-fixtures/" .git/info/exclude 2>/dev/null || echo "/.cuda-fixtures/" >> .git/info/exclude
    du -sh "$pack" .cuda-fixtures
    ;;
  models-dir)
    # Where the GPU scripts synthesize models: $MODELS, else /dev/shm when it has room (40 GiB), since
    # a synthesized file is written at the disk's rate otherwise (a 0.5B Q8_0 file on a 2-core
    # development machine: 4.1 s to disk, 2.5 s to /dev/shm; the 27B geometry took 284 s on the H100
    # machine) and a bench reads it from the page cache anyway; else /tmp.
    shm_free_kb=$(df -k --output=avail /dev/shm 2>/dev/null | tail -1 | tr -d ' ')
    if [ -n "${MODELS:-}" ]; then
      echo "$MODELS"
    elif [ "${shm_free_kb:-0}" -ge 41943040 ] 2>/dev/null; then
      echo /dev/shm/fak-models
    else
      echo /tmp/fak-models
    fi
    ;;
  unpack)
    [ -x "$pack/bin/fak" ] || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$pack/payload.tar.xz" "$pack" || exit 1
    tok="$pack/shared/fixtures/tokenizers/qwen3"
    [ -f "$tok/tokenizer.json" ] || gunzip -k "$tok/tokenizer.json.gz"
    tiny="$pack/shared/fixtures/llamacpp-tiny"
    [ -f "$tiny/tiny-llama-q6_k.gguf" ] || [ ! -f "$tiny/tiny-llama-q6_k.gguf.xz" ] ||
      python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
        "$tiny/tiny-llama-q6_k.gguf.xz" "$tiny/tiny-llama-q6_k.gguf" || exit 1
    [ -e ../shared ] || ln -s "$PWD/$pack/shared" ../shared
    if [ ! -f tests/fixtures/hf/qwen35-tiny/oracle.json ] && [ -f .cuda-fixtures/hf.tar.xz ]; then
      mkdir -p tests/fixtures/hf
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        .cuda-fixtures/hf.tar.xz tests/fixtures/hf || exit 1
    fi
    ;;
  run)
    out=${OUT:-build/cuda-results}
    mkdir -p "$out"
    "$0" unpack || exit 1
    export LD_LIBRARY_PATH="$PWD/$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fak="$pack/bin/fak"
    tok="$pack/shared/fixtures/tokenizers/qwen3"
    export FAK_SYNTH_TOKENIZER="$PWD/$tok"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$out/gpu.txt"
    "$fak" --version | tee -a "$out/gpu.txt"
    rc=0
    echo "== CUDA tests"
    "$pack/bin/cuda_backend_test" --gtest_output="json:$out/cuda_backend_test.json" > "$out/cuda_backend_test.log" 2>&1 || rc=1
    grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|Failure|error|Expected|Which is|actual' "$out/cuda_backend_test.log" | head -60
    echo "== benchmarks (${FAK_CUDA_BENCH_GEOMETRIES:-qwen2.5-1.5b}: ${FAK_CUDA_BENCH_TYPES:-q8_0 q4_k_m})"
    models=$(scripts/test-cuda.sh models-dir)
    mkdir -p "$models"
    for geometry in ${FAK_CUDA_BENCH_GEOMETRIES:-qwen2.5-1.5b}; do
      for type in ${FAK_CUDA_BENCH_TYPES:-q8_0 q4_k_m}; do
        m="$models/$geometry-$type.gguf"
        [ -f "$m" ] || "$fak" synth --geometry "$geometry" --type "$type" -o "$m" > /dev/null || { rc=1; continue; }
        "$fak" bench -m "$m" --backend cuda -p "${FAK_CUDA_BENCH_P:-512}" -n "${FAK_CUDA_BENCH_N:-128}" \
          -r "${FAK_CUDA_BENCH_R:-3}" --json > "$out/bench-$geometry-$type.json" 2> "$out/bench-$geometry-$type.err" || rc=1
        python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    print("%-14s %-8s %-6s %10.1f tok/s +- %.1f" % (sys.argv[2], sys.argv[3], r["test"], r["tokens_per_second"], r["stddev"]))
' "$out/bench-$geometry-$type.json" "$geometry" "$type" || tail -3 "$out/bench-$geometry-$type.err"
      done
    done
    exit $rc
    ;;
  *)
    echo "usage: scripts/test-cuda.sh pack|unpack|run|models-dir" >&2
    exit 2
    ;;
esac
