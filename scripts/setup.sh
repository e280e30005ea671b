#!/usr/bin/env bash
# Installs the Debian packages fak builds and tests with (idempotent: only missing ones are fetched),
# then configures and builds the Release tree in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(
  cmake ninja-build g++ pkg-config git
  nlohmann-json3-dev libcli11-dev libfmt-dev libcpp-httplib-dev libssl-dev
  libpcre2-dev libutf8proc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
  g++-aarch64-linux-gnu qemu-user-static
  python3 python3-jinja2 python3-venv python3-numpy
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi
jobs=${FAK_JOBS:-$(nproc)}
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
fi
ninja -C build -j "$jobs"
# The official openai client and a JSON-schema validator, for the server's client tests (test oracles
# only: fak needs no Python).
if [ ! -x build/venv/bin/python ] || ! build/venv/bin/python -c "import openai, jsonschema" 2>/dev/null; then
  [ -x build/venv/bin/python ] || python3 -m venv build/venv
  build/venv/bin/pip install -q --disable-pip-version-check "openai>=1.50,<3" "jsonschema>=4.18,<5"
fi
