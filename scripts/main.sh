#!/usr/bin/env bash
# fak's main job on models it makes itself (nothing is downloaded): generate text, and JSON that
# follows a schema, from the trained models/qwen3-20m (trained by tools/train on Debian's own texts);
# then synthesize a random-weight model at the Qwen2.5-0.5B geometry with the real Qwen tokenizer and
# benchmark prefill and decode, alone and for 8 and 32 sequences at once. Run scripts/setup.sh
# first. FAK_MAIN_GEOMETRY / FAK_MAIN_TYPE change the benchmarked model (e.g. qwen2.5-1.5b, q4_k_m).
set -euo pipefail
cd "$(dirname "$0")/.."
fak=./build/apps/fak/fak
geometry=${FAK_MAIN_GEOMETRY:-qwen2.5-0.5b}
type=${FAK_MAIN_TYPE:-q8_0}
model=build/models/${geometry}-${type}.gguf
mkdir -p build/models
$fak --version
if [ ! -f "$model" ]; then
  echo "== synthesizing $model"
  $fak synth --geometry "$geometry" --type "$type" -o "$model"
fi
trained=models/qwen3-20m/qwen3-20m-q8_0.gguf
echo "== generating from a trained model ($trained, 20M parameters, Python sources and Debian docs)"
$fak run -m "$trained" -p '"""Helpers for reading configuration files."""

import os
import sys


def ' -n 96 --temp 0.8 --top-p 0.9 --repeat-penalty 1.1 --seed 3
echo "== JSON constrained by a schema (bench/schemas/package.json)"
$fak run -m "$trained" -p 'Package: python3-minimal
As JSON: ' -n 300 --json-schema bench/schemas/package.json --temp 0.7 --seed 1
$fak inspect "$model" | sed -n '1,12p'
echo "== benchmark"
$fak bench -m "$model" -p 128 -n 32 -r 3
echo "== many sequences at once (aggregate tok/s through the batched runtime)"
$fak bench batch -m "$model" -p 128 -n 32 -b 1,8,32 -r 1
