#!/usr/bin/env bash
# The whole test suite: clang-format, sanitizer builds + tests (ASan+UBSan, TSan), the oracle's own
# tests, fuzzing for a bounded time, NEON
# kernels under qemu, clang-tidy over the engine core, and last the Release build's ctest (whose
# summary line closes the output).
# Run scripts/setup.sh first (the README's test command does).
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=${FAK_JOBS:-$(nproc)}
fuzz_secs=${FAK_FUZZ_SECONDS:-60}
failed=()

# Each step's wall time goes to the log with its name, for the CI budget (two cores, setup included: a
# clean run took 62.6 minutes before the fuzz targets and the TSan runs went side by side, ~3.5 less).
step() {
  local name=$1 t0=$SECONDS
  shift
  echo "== $name"
  if ! "$@"; then failed+=("$name"); echo "== $name FAILED"; fi
  echo "== $name: $((SECONDS - t0)) s"
}

# The sanitizer trees are unity builds (several sources of a target compiled as one file): each header
# set (CLI11, nlohmann/json, gtest) is parsed and its templates instantiated once per batch instead of
# once per file. So the file-local names of a target's sources must differ from one another (shared
# helpers live in headers: core/timer.h, engine/test_fixtures.h, ...).
asan() {
  if [ ! -f build-asan/build.ninja ]; then
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Asan -DFAK_ENABLE_CUDA=OFF -DCMAKE_UNITY_BUILD=ON \
      > /dev/null || return 1
  fi
  ninja -C build-asan -j "$jobs" || return 1
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" --timeout 600
}

# ThreadSanitizer over the thread pool (core), the engine (batched runtime, sessions, scheduler), the
# hybrid architecture's recurrent-state path and the model writer (tensors written while the next is
# produced).
tsan() {
  if [ ! -f build-tsan/build.ninja ]; then
    cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Tsan -DFAK_ENABLE_CUDA=OFF -DCMAKE_UNITY_BUILD=ON \
      > /dev/null || return 1
  fi
  ninja -C build-tsan -j "$jobs" core_test engine_test qwen35_test formats_test || return 1
  # The numerics-only model comparisons (perplexity against llama.cpp, HF oracle fixtures, the larger
  # batch-invariance models) take minutes each under TSan and add no concurrency the rest lacks.
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  build-tsan/core/core_test --gtest_brief=1 || return 1
  build-tsan/formats/formats_test --gtest_brief=1 --gtest_filter='GgufWriter.*' || return 1
  # The two long runs (the engine's tests in two shards, and the hybrid's; 269 s and 132 s one after the
  # other on two cores) side by side, their outputs printed whole when all have ended.
  local logs=() pids=() rc=0
  for shard in 0 1; do
    logs+=("build-tsan/engine_test-$shard.log")
    GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$shard build-tsan/engine/engine_test --gtest_brief=1 \
      --gtest_filter='-Perplexity.Trained*:Fixtures/HfOracle.*:Types/BatchInvariance.*/qwen2_*' \
      > "${logs[-1]}" 2>&1 &
    pids+=($!)
  done
  # The hybrid: recurrent-state ops across the pool's threads, snapshots, the scheduler's checkpoints
  # (the filter 'Hybrid.*' had matched none of these parameterized names).
  logs+=(build-tsan/qwen35_test.log)
  build-tsan/engine/qwen35_test --gtest_brief=1 --gtest_filter='Fixtures/Hybrid.*' > "${logs[-1]}" 2>&1 &
  pids+=($!)
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  cat "${logs[@]}"
  return $rc
}

step "clang-format" scripts/check-format.sh
step "asan+ubsan tests" asan
step "tsan tests (thread pool, engine)" tsan
step "oracle comparison tests (numpy)" /usr/bin/python3 tools/oracle/compare_test.py
step "fuzz (${fuzz_secs}s per target)" scripts/fuzz.sh "$fuzz_secs"
if [ -x scripts/test-neon.sh ]; then
  step "neon kernels under qemu-aarch64" scripts/test-neon.sh
fi
step "release build" ninja -C build -j "$jobs"
step "clang-tidy (engine core)" scripts/tidy.sh
if [ ${#failed[@]} -gt 0 ]; then
  echo "== failed steps: ${failed[*]}"
fi
echo "== release tests"
t0=$SECONDS
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 600
rc=$?
echo "== release tests: $((SECONDS - t0)) s"
t0=$SECONDS
echo "== fak serve through the official openai Python client"
build/venv/bin/python tests/python/openai_client_test.py build/apps/fak/fak || rc=1
echo "== constrained output (random JSON schemas, tool calls) through the openai client"
build/venv/bin/python tests/python/constrained_test.py build/apps/fak/fak || rc=1
build/venv/bin/python tests/python/constrained_test.py build/apps/fak/fak --schemas 60 \
  --model models/qwen3-20m/qwen3-20m-q8_0.gguf || rc=1
echo "== client tests: $((SECONDS - t0)) s"
# The verdict last, where a log's tail shows it.
if [ ${#failed[@]} -gt 0 ]; then
  echo "== failed steps: ${failed[*]}"
  exit 1
fi
[ "$rc" -ne 0 ] && echo "== the release tests or a client test failed"
exit $rc
