#!/usr/bin/env bash
# fak's main job on a model it makes itself (nothing is downloaded): synthesize a random-weight model
# at the Qwen2.5-0.5B geometry with the real Qwen tokenizer, generate text from a chat prompt, and
# benchmark prefill and decode, alone and for 8 and 32 sequences at once. Run scripts/setup.sh
# first. FAK_MAIN_GEOMETRY / FAK_MAIN_TYPE change the model (e.g. qwen2.5-1.5b, q4_k_m).
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
$fak inspect "$model" | sed -n '1,12p'
echo "== generating (random weights: the text is noise, the speed is real)"
$fak run -m "$model" -p "<|im_start|>user
Write a haiku about the sea.<|im_end|>
<|im_start|>assistant
" -n 48 --temp 0.7 --seed 1
echo "== benchmark"
$fak bench -m "$model" -p 128 -n 32 -r 3
echo "== many sequences at once (aggregate tok/s through the batched runtime)"
$fak bench batch -m "$model" -p 128 -n 32 -b 1,8,32 -r 1
