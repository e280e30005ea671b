#!/usr/bin/env python3
"""Records an HF transformers oracle for any local checkpoint folder, in the tests/fixtures/hf layout.

Meant for real models on the GPU machine: the same prompt set as the committed tiny fixtures, encoded
with the checkpoint's own tokenizer (or --tokenizer), float32 reference logits, final hidden states,
argmax and top-k at every position and a greedy continuation. compare.py then checks fak's dumps
against the folder it writes.

  python3 tools/oracle/record.py --model /models/Qwen3-0.6B --out /tmp/oracle-qwen3-0.6b --device cuda
"""

import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_specs  # noqa: E402
import oracle_core as core  # noqa: E402


def checkpoint_dtype(model_dir):
  with open(os.path.join(model_dir, "config.json")) as f:
    cfg = json.load(f)
  text = cfg.get("text_config", cfg)
  return text.get("torch_dtype") or text.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype") or ""


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--model", required=True, help="checkpoint folder (config.json + safetensors)")
  parser.add_argument("--out", required=True, help="folder to write oracle.json and the .npy files to")
  parser.add_argument("--tokenizer", help="tokenizer folder (default: --model if it has tokenizer.json, "
                                          "else the Qwen3 tokenizer in shared/fixtures)")
  parser.add_argument("--device", default="cpu", help="torch device, e.g. cuda")
  parser.add_argument("--bf16-run", action="store_true", help="also run in bfloat16 and record its agreement")
  parser.add_argument("--residuals", action="store_true", help="also write residual_p<N>.npy (n_layer + 1 rows)")
  parser.add_argument("--threads", type=int, default=1, help="CPU threads for torch")
  args = parser.parse_args()
  torch.set_num_threads(args.threads)

  tok_dir = args.tokenizer
  if tok_dir is None:
    tok_dir = args.model if os.path.exists(os.path.join(args.model, "tokenizer.json")) else core.TOKENIZER_DIR
  tok_json = os.path.join(tok_dir, "tokenizer.json")
  if not os.path.exists(tok_json):
    sys.exit(f"{tok_json} not found")
  prompts = fixture_specs.prompts(core.load_tokenizer(tok_dir))

  model32 = core.load_checkpoint(args.model, torch.float32, args.device)
  model16 = core.load_checkpoint(args.model, torch.bfloat16, args.device) if args.bf16_run else None
  os.makedirs(args.out, exist_ok=True)
  records = []
  for index, prompt in enumerate(prompts):
    records.append(core.record_prompt(args.out, index, prompt, model32, model16, args.residuals))
    r = records[-1]
    print(f"p{index} {prompt['name']}: {prompt['n_tokens']} tokens, min top-2 margin "
          f"{min(r['top2_margin']):.5f}, greedy {r['greedy']['tokens']}", flush=True)

  oracle = {
      "schema": core.SCHEMA,
      "name": os.path.basename(os.path.normpath(args.model)),
      "arch": model32.config.model_type,
      "hf_architecture": type(model32).__name__,
      "description": f"recorded from {os.path.basename(os.path.normpath(args.model))}",
      "checkpoint": {"dtype": checkpoint_dtype(args.model), "files": core.checkpoint_digests(args.model)},
      "tokenizer": {"path": tok_json, "sha256": core.sha256_file(tok_json), "add_special_tokens": False},
      "reference": core.reference_info(args.device),
      "vocab_size": model32.config.vocab_size,
      "hidden_size": model32.config.hidden_size,
      "num_hidden_layers": model32.config.num_hidden_layers,
      "prompts": records,
  }
  core.write_json(os.path.join(args.out, "oracle.json"), oracle)
  print(f"wrote {args.out}/oracle.json")


if __name__ == "__main__":
  main()
