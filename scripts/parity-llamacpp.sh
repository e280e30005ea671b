#!/usr/bin/env bash
# Greedy parity between fak and llama.cpp on fak-made GGUF files: synthesizes the Qwen2.5-1.5B
# geometry at f16, converts it with `fak quantize` to Q8_0 and Q4_K_M, builds
# tools/llamacpp_ref/llamacpp_greedy against a llama.cpp source tree and build, and runs
# tools/llamacpp_ref/parity.py (10 prompts of bench/prompts/prompts-v1.jsonl, 32 greedy tokens, 2 threads).
# Usage: scripts/parity-llamacpp.sh LLAMA_CPP_SRC LLAMA_CPP_BUILD_BIN WORK_DIR [OUT.json]
# Needs a Release build of fak in build/ and about 6 GB free in WORK_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$1 bin=$2 work=$3 out=${4:-$work/llamacpp-parity.json}
fak=build/apps/fak/fak
mkdir -p "$work"
g++ -O2 -std=c++17 -Wall tools/llamacpp_ref/llamacpp_greedy.cpp -I"$src/include" -I"$src/ggml/include" \
  -L"$bin" -lllama -lggml -lggml-base -Wl,-rpath,"$bin" -o "$work/llamacpp_greedy"
f16=$work/qwen2.5-1.5b-f16.gguf
[ -f "$f16" ] || "$fak" synth --geometry qwen2.5-1.5b --type f16 -o "$f16"
for type in q8_0 q4_k_m; do
  [ -f "$work/qwen2.5-1.5b-$type.gguf" ] || "$fak" quantize "$f16" "$work/qwen2.5-1.5b-$type.gguf" "$type"
done
python3 tools/llamacpp_ref/parity.py --fak "$fak" --tool "$work/llamacpp_greedy" \
  --model "$work/qwen2.5-1.5b-q8_0.gguf" --model "$work/qwen2.5-1.5b-q4_k_m.gguf" --out "$out"
