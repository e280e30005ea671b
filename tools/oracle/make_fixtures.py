#!/usr/bin/env python3
"""Builds the HuggingFace transformers oracle fixtures in tests/fixtures/hf/.

For each architecture fak runs from HF checkpoints (llama, qwen2, qwen3) this makes a tiny model from the
real config scaled down (hidden 16, 4 query heads, 2 KV heads, head_dim 8, 2 layers, the full Qwen
vocabulary of 151,936 rows, tied embeddings), draws its weights once from a fixed seed, rounds them to
bf16, saves a bf16 safetensors checkpoint with save_pretrained, loads that checkpoint back and records
what transformers computes from it in float32: logits, final hidden states, per-layer residuals, argmax
and top-k at every position, and a 16-token greedy continuation. A bfloat16 run is recorded for
information only.

Run from the repository root (see tools/oracle/README.md):
  .venv-oracle/bin/python tools/oracle/make_fixtures.py
"""

import argparse
import json
import os
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_specs  # noqa: E402
import oracle_core as core  # noqa: E402

OUT_DIR = "tests/fixtures/hf"


def init_weights(model, spec):
  """Draws every parameter from numpy's PCG64 in state-dict order, then rounds to bf16."""
  rng = np.random.default_rng(spec.seed)
  init = spec.init
  state = {}
  for name, param in model.state_dict().items():
    if name == "lm_head.weight" and spec.config_kwargs["tie_word_embeddings"]:
      continue
    shape = tuple(param.shape)
    if name.endswith("A_log"):
      # Per-head decay rates A in [0.5, 8]: the state forgets over a few to a few hundred tokens.
      w = np.log(rng.uniform(0.5, 8.0, size=shape))
    elif name.endswith("dt_bias"):
      w = rng.uniform(0.5, 1.5, size=shape)
    elif name.endswith("conv1d.weight"):
      w = rng.normal(0.0, 0.3, size=shape)
    elif name.endswith("norm.weight") and init.get("zero_centred_norms") and "linear_attn" not in name:
      w = rng.uniform(-init["norm_spread"], init["norm_spread"], size=shape)  # the model scales by 1 + w
    elif name.endswith("norm.weight"):
      w = rng.uniform(1.0 - init["norm_spread"], 1.0 + init["norm_spread"], size=shape)
    elif name.endswith(".bias"):
      w = rng.normal(0.0, init["bias_std"], size=shape)
    elif name == "model.embed_tokens.weight":
      w = rng.normal(0.0, init["embed_std"], size=shape)
      # Per-row scale, log-normal: a few long rows dominate the tied output projection, which spreads
      # the top of each logit row apart so the argmax is not decided by rounding noise.
      w *= np.exp(init["embed_row_log_std"] * rng.standard_normal(size=(shape[0], 1)))
    else:
      w = rng.normal(0.0, init["matrix_std"], size=shape)
    state[name] = torch.from_numpy(w.astype(np.float32)).to(torch.bfloat16)
  model.to(torch.bfloat16)
  missing, unexpected = model.load_state_dict(state, strict=False)
  unexpected = [k for k in unexpected]
  missing = [k for k in missing if k != "lm_head.weight"]
  if missing or unexpected:
    raise RuntimeError(f"{spec.name}: state dict mismatch, missing {missing}, unexpected {unexpected}")
  if spec.config_kwargs["tie_word_embeddings"]:
    model.tie_weights()


def to_classic_config(path):
  """Rewrites a transformers 5 config.json in the layout of the published hub checkpoints.

  transformers 5 writes `dtype` and `rope_parameters`; Llama-3.x and Qwen3 checkpoints on the hub carry
  `torch_dtype`, `rope_theta` and `rope_scaling`. Both layouts load to the same model.
  """
  with open(path) as f:
    cfg = json.load(f)
  rope = dict(cfg.pop("rope_parameters"))
  out = {}
  for key, value in cfg.items():
    if key == "dtype":
      out["torch_dtype"] = value
    else:
      out[key] = value
  out["rope_theta"] = rope.pop("rope_theta")
  out["rope_scaling"] = rope if rope.get("rope_type", "default") != "default" else None
  out = dict(sorted(out.items()))
  with open(path, "w") as f:
    json.dump(out, f, indent=2)
    f.write("\n")


def save_checkpoint(spec, out_dir):
  config = spec.config_class(**spec.config_kwargs)
  torch.manual_seed(spec.seed)  # only for the throw-away default init; the real weights come from numpy
  model = spec.model_class(config)
  init_weights(model, spec)
  model.generation_config.bos_token_id = spec.config_kwargs["bos_token_id"]
  model.generation_config.eos_token_id = spec.config_kwargs["eos_token_id"]
  model.generation_config.do_sample = False
  save_kwargs = {}
  if spec.max_shard_size:
    save_kwargs["max_shard_size"] = spec.max_shard_size
  model.save_pretrained(out_dir, **save_kwargs)
  if spec.classic_config:
    to_classic_config(os.path.join(out_dir, "config.json"))


def check_loaded(model, spec):
  """The reloaded checkpoint must be the model that was specified: head_dim honoured, RoPE read back."""
  cfg = spec.config_kwargs
  sd = model.state_dict()
  hybrid = "layer_types" in cfg
  full = cfg["layer_types"].index("full_attention") if hybrid else 0
  q = tuple(sd[f"model.layers.{full}.self_attn.q_proj.weight"].shape)
  k = tuple(sd[f"model.layers.{full}.self_attn.k_proj.weight"].shape)
  # The hybrid's q_proj also gives each head's output gate.
  want_q = ((2 if hybrid else 1) * cfg["num_attention_heads"] * cfg["head_dim"], cfg["hidden_size"])
  want_k = (cfg["num_key_value_heads"] * cfg["head_dim"], cfg["hidden_size"])
  if q != want_q or k != want_k:
    raise RuntimeError(f"{spec.name}: head_dim not honoured (q_proj {q}, k_proj {k})")
  rope = dict(model.config.rope_parameters)
  if hybrid:
    want = cfg["rope_parameters"]
  else:
    want = dict(cfg.get("rope_scaling") or {"rope_type": "default"}, rope_theta=cfg["rope_theta"])
  if rope != want:
    raise RuntimeError(f"{spec.name}: RoPE read back as {rope}, want {want}")
  if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
    raise RuntimeError(f"{spec.name}: lm_head is not tied to the embedding")


def make_fixture(spec, prompts, tokenizer_sha):
  out_dir = os.path.join(OUT_DIR, spec.name)
  if os.path.isdir(out_dir):
    shutil.rmtree(out_dir)
  os.makedirs(out_dir)
  save_checkpoint(spec, out_dir)

  model32 = core.load_checkpoint(out_dir, torch.float32)
  model16 = core.load_checkpoint(out_dir, torch.bfloat16)
  check_loaded(model32, spec)
  check_loaded(model16, spec)

  vocab = spec.config_kwargs["vocab_size"]
  records = []
  for index, prompt in enumerate(prompts):
    if vocab < 151936:
      prompt = dict(prompt, ids=[i % vocab for i in prompt["ids"]])
    records.append(core.record_prompt(out_dir, index, prompt, model32, model16, keep_residuals=spec.residuals))
    if vocab < 151936:
      records[-1]["token_ids_note"] = f"the Qwen3 tokenizer's ids for text, modulo vocab_size {vocab}"
    r = records[-1]
    print(f"  p{index} {prompt['name']}: {prompt['n_tokens']} tokens, min top-2 margin "
          f"{min(r['top2_margin'] + r['greedy']['top2_margin']):.5f}, greedy {r['greedy']['tokens']}", flush=True)

  oracle = {
      "schema": core.SCHEMA,
      "name": spec.name,
      "arch": model32.config.model_type,
      "hf_architecture": type(model32).__name__,
      "description": spec.description,
      "checkpoint": {
          "dtype": "bfloat16",
          "config_layout": "classic" if spec.classic_config else "transformers5",
          "sharded": bool(spec.max_shard_size),
          "files": core.checkpoint_digests(out_dir),
      },
      "tokenizer": {"path": core.TOKENIZER_DIR + "/tokenizer.json", "sha256": tokenizer_sha,
                    "add_special_tokens": False},
      "reference": core.reference_info("cpu"),
      "seed": spec.seed,
      "init": spec.init,
      "vocab_size": model32.config.vocab_size,
      "hidden_size": model32.config.hidden_size,
      "num_hidden_layers": model32.config.num_hidden_layers,
      "prompts": records,
  }
  core.write_json(os.path.join(out_dir, "oracle.json"), oracle)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--only", help="make only this fixture (llama3-tiny, qwen2-tiny, qwen3-tiny, qwen2-256, qwen35-tiny, qwen3next-tiny, qwen35moe-tiny)")
  args = parser.parse_args()
  torch.set_num_threads(1)
  torch.use_deterministic_algorithms(True)
  if not os.path.isdir(core.TOKENIZER_DIR):
    sys.exit(f"{core.TOKENIZER_DIR} not found: run from the repository root with shared/ beside it")

  tokenizer_sha = core.sha256_file(os.path.join(core.TOKENIZER_DIR, "tokenizer.json"))
  prompts = fixture_specs.prompts(core.load_tokenizer())
  for spec in fixture_specs.SPECS:
    if args.only and spec.name != args.only:
      continue
    print(f"{spec.name}: {spec.description}", flush=True)
    make_fixture(spec, prompts, tokenizer_sha)


if __name__ == "__main__":
  main()
