#!/usr/bin/env bash
# Cross-compiles the quant and CPU kernel tests for arm64 (NEON + dotprod) and runs them under
# qemu-aarch64. Needs g++-aarch64-linux-gnu, qemu-user-static and libgtest-dev (for its sources).
# Usage: scripts/test-neon.sh [build-dir]   (default: build-aarch64 in the repository root)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build-aarch64}"
jobs="${FAK_JOBS:-2}"

for tool in aarch64-linux-gnu-g++ cmake ninja; do
  command -v "$tool" >/dev/null || { echo "test-neon: $tool not found" >&2; exit 1; }
done
qemu="$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)"
[ -n "$qemu" ] || { echo "test-neon: qemu-aarch64 not found (apt install qemu-user-static)" >&2; exit 1; }
[ -d /usr/src/googletest/googletest ] || { echo "test-neon: /usr/src/googletest missing (libgtest-dev)" >&2; exit 1; }

cmake -S "$root/backends/cpu/cross" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-toolchain.cmake" >/dev/null
ninja -C "$build" -j "$jobs" cpu_kernels_test_arm64 quant_test_arm64

# dotprod is part of qemu's default "max" CPU. Fail unless the NEON table is among those tested.
cd "$root"
"$qemu" -L /usr/aarch64-linux-gnu "$build/cpu_kernels_test_arm64" --gtest_list_tests | grep -q "/neon" ||
  { echo "test-neon: the NEON kernel table was not selected under qemu" >&2; exit 1; }
for t in quant_test_arm64 cpu_kernels_test_arm64; do
  echo "== $t (qemu-aarch64)"
  "$qemu" -L /usr/aarch64-linux-gnu "$build/$t" --gtest_brief=1
done
