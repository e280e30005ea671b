#!/usr/bin/env bash
# fak's main job on a default that needs nothing downloaded. Run scripts/setup.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
./build/apps/fak/fak --version
./build/apps/fak/fak inspect --digest ../shared/fixtures/llamacpp-tiny/tiny-llama-q4_k_m.gguf
