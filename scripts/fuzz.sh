#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for a bounded time over the
# committed corpus. New inputs go to a scratch folder; `--merge` folds the interesting ones back into
# tests/fuzz/corpus. Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [--merge]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
merge=${2:-}
build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFAK_BUILD_FUZZERS=ON -DFAK_BUILD_TESTS=OFF -DFAK_ENABLE_CUDA=OFF > /dev/null
fi
ninja -C "$build" gguf_fuzz safetensors_fuzz tokenizer_json_fuzz chat_template_fuzz
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
jobs=${FAK_JOBS:-$(nproc)}
# One target: fuzz it, keep what it found, print its stats; non-zero when it found a failure.
fuzz_target() {
  local t=$1 status=0
  mkdir -p "$scratch/$t"
  if ! "$build/tests/fuzz/${t}_fuzz" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$scratch/$t-" -print_final_stats=1 "$scratch/$t" "tests/fuzz/corpus/$t" 2> "$scratch/$t.log"; then
    status=1
    tail -40 "$scratch/$t.log"
    mkdir -p "$build/fuzz-artifacts"  # kept for a look, outside the source tree
    for a in "$scratch/$t"-crash-* "$scratch/$t"-leak-* "$scratch/$t"-timeout-*; do
      [ -f "$a" ] && cp "$a" "$build/fuzz-artifacts/" && echo "kept $(basename "$a") in $build/fuzz-artifacts/"
    done
  else
    grep -E '^(Done|stat::number_of_executed_units)' "$scratch/$t.log" || true
  fi
  if [ "$merge" = "--merge" ]; then
    "$build/tests/fuzz/${t}_fuzz" -merge=1 "tests/fuzz/corpus/$t" "$scratch/$t" 2>&1 | tail -1
  fi
  return $status
}
# The targets run side by side, one per core (each fuzzes one thread for its whole time), each one's
# output printed whole when it ends.
targets=(gguf safetensors tokenizer_json chat_template)
status=0
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  pids=()
  for t in "${targets[@]:i:jobs}"; do
    fuzz_target "$t" > "$scratch/$t.out" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  for t in "${targets[@]:i:jobs}"; do
    echo "== fuzz $t for ${secs}s"
    cat "$scratch/$t.out"
  done
done
exit $status
