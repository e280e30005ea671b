#!/usr/bin/env python3
"""Scores weight seeds for a tiny fixture model, to pick the seeds written in fixture_specs.py.

A random model's argmax is only a useful parity target when the top two logits are not a rounding error
apart, and its greedy continuation is only a useful decode test when it does not repeat one token. For
each candidate seed this prints the smallest top-1/top-2 margin over every prompt position and greedy
step (relative to that row's logit standard deviation) and how many distinct tokens each greedy
continuation holds. Nothing is written.

  .venv-oracle/bin/python tools/oracle/search_seeds.py qwen3-tiny --first 20250303 --count 20
"""

import argparse
import dataclasses
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_specs  # noqa: E402
import make_fixtures  # noqa: E402
import oracle_core as core  # noqa: E402


@torch.no_grad()
def score(spec, prompts):
  model = spec.model_class(spec.config_class(**spec.config_kwargs))
  make_fixtures.init_weights(model, spec)
  model = model.float().eval()
  rel, distinct, argmax = [], [], set()
  for p in prompts:
    logits = model(input_ids=torch.tensor([p["ids"]]), use_cache=False).logits[0]
    rel += (core.top2_margin(logits) / logits.std(-1)).tolist()
    argmax.update(logits.argmax(-1).tolist())
    gen = model.generate(torch.tensor([p["ids"]]), do_sample=False, max_new_tokens=core.GREEDY_TOKENS,
                         eos_token_id=None, pad_token_id=0, output_scores=True, return_dict_in_generate=True)
    scores = torch.stack([s[0] for s in gen.scores]).float()
    rel += (core.top2_margin(scores) / scores.std(-1)).tolist()
    distinct.append(len(set(gen.sequences[0, len(p["ids"]):].tolist())))
  return np.array(rel), distinct, len(argmax)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("name", help="fixture name from fixture_specs.SPECS")
  parser.add_argument("--first", type=int, required=True, help="first seed")
  parser.add_argument("--count", type=int, default=10)
  parser.add_argument("--init", action="append", default=[], metavar="KEY=VALUE",
                      help="override one of the spec's init values, e.g. embed_std=0.1")
  args = parser.parse_args()
  torch.set_num_threads(1)
  base = next(s for s in fixture_specs.SPECS if s.name == args.name)
  init = dict(base.init)
  for item in args.init:
    key, value = item.split("=", 1)
    if key not in init:
      parser.error(f"unknown init key {key!r} (have {sorted(init)})")
    init[key] = float(value)
  prompts = fixture_specs.prompts(core.load_tokenizer())
  for seed in range(args.first, args.first + args.count):
    rel, distinct, n_argmax = score(dataclasses.replace(base, seed=seed, init=init), prompts)
    print(f"{args.name} {init} seed {seed}: min rel margin {rel.min():.5f}, below 0.01: {np.mean(rel < 0.01):.3f}, "
          f"distinct prompt argmax {n_argmax}, greedy distinct {distinct} (sum {sum(distinct)})", flush=True)


if __name__ == "__main__":
  main()
