#!/usr/bin/env bash
# clang-tidy (.clang-tidy) over the engine core: engine/, ops/ and the CPU backend's seam, with every
# warning an error. Needs build/compile_commands.json (scripts/setup.sh makes it). About ten seconds
# per file on this machine's cores, so the whole tree (~170 files) is left to `scripts/tidy.sh all`.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${FAK_JOBS:-$(nproc)}
if [ "${1:-}" = "all" ]; then
  mapfile -t files < <(git ls-files '*.cpp' | grep -v -e '_test\.cpp$' -e '^tests/' -e '^tools/' -e '\.cu$' \
    -e '_neon\.cpp$')
else
  mapfile -t files < <(git ls-files 'engine/*.cpp' 'ops/*.cpp' 'backends/cpu/cpu_backend.cpp' 'backends/cpu/cpu_backend_hybrid.cpp' 'backends/cpu/moe.cpp' \
    'apps/fak/cmd_bench_batch.cpp' | grep -v -e '_test\.cpp$' -e '^engine/convert/')
fi
printf '%s\n' "${files[@]}" | xargs -P "$jobs" -n 1 clang-tidy -p build --quiet --warnings-as-errors='*'
echo "clang-tidy: ${#files[@]} files clean"
