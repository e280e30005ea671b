#!/usr/bin/env python3
"""Compares logits that fak dumped (.npy) with a HuggingFace oracle fixture.

For every prompt it prints the cosine similarity, the largest absolute difference, KL(oracle || fak) in
nats and top-1 agreement: on the full logits rows the fixture stores, and, when the fixture's lm_head
input (hidden_p<N>.npy) and a bf16/f16/f32 tied or separate output matrix are available, on every
position, rebuilt as hidden . W^T. Argmax is also checked against the fixture's argmax list at every
position the dump covers. Needs numpy only (no torch).

  # dumps named logits_p<N>.npy, shape (n_tokens, vocab) or (vocab,) for the last position
  python3 tools/oracle/compare.py tests/fixtures/hf/qwen3-tiny --dump-dir /tmp/fak-dump
  python3 tools/oracle/compare.py tests/fixtures/hf/qwen3-tiny --logits 0=/tmp/p0.npy --json

Exit status 1 when a threshold is missed (--min-cosine, default 0.9999; argmax must agree everywhere
unless --allow-argmax-mismatch), 2 on bad input.
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": "bf16"}


def fail_input(message):
  print(f"compare.py: {message}", file=sys.stderr)
  sys.exit(2)


def load_npy(path):
  try:
    a = np.load(path, allow_pickle=False)
  except (OSError, ValueError) as e:
    fail_input(f"{path}: {e}")
  if a.dtype.kind != "f":
    fail_input(f"{path}: dtype {a.dtype} is not floating point")
  return a.astype(np.float64)


def read_safetensors_tensor(paths, name):
  """One tensor from a list of safetensors files, as float32; None when no file holds it."""
  for path in paths:
    with open(path, "rb") as f:
      header_len = struct.unpack("<Q", f.read(8))[0]
      header = json.loads(f.read(header_len))
      if name not in header:
        continue
      info = header[name]
      begin, end = info["data_offsets"]
      f.seek(8 + header_len + begin)
      raw = f.read(end - begin)
    kind = SAFETENSORS_DTYPES.get(info["dtype"])
    if kind is None:
      fail_input(f"{path}: tensor {name} has dtype {info['dtype']} (want F32, F16 or BF16)")
    if kind == "bf16":
      bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
      values = bits.view(np.float32)
    else:
      values = np.frombuffer(raw, dtype=np.dtype(kind).newbyteorder("<"))
    return values.astype(np.float32).reshape(info["shape"])
  return None


def output_matrix(fixture_dir):
  files = sorted(os.path.join(fixture_dir, f) for f in os.listdir(fixture_dir) if f.endswith(".safetensors"))
  if not files:
    return None
  w = read_safetensors_tensor(files, "lm_head.weight")
  if w is None:
    w = read_safetensors_tensor(files, "model.embed_tokens.weight")
  return w


def log_softmax(x):
  m = x.max(axis=-1, keepdims=True)
  return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def row_metrics(ref, got):
  """ref, got: (rows, vocab) float64. Returns per-row cosine, max abs diff, KL(ref || got), top-1 agree."""
  cos = (ref * got).sum(-1) / (np.linalg.norm(ref, axis=-1) * np.linalg.norm(got, axis=-1))
  max_abs = np.abs(ref - got).max(-1)
  lp, lq = log_softmax(ref), log_softmax(got)
  kl = (np.exp(lp) * (lp - lq)).sum(-1)
  agree = ref.argmax(-1) == got.argmax(-1)
  return cos, max_abs, kl, agree


def dump_positions(dump, n_tokens, stored_positions, path):
  """Which prompt positions the rows of a dump stand for."""
  if dump.ndim == 1:
    return dump[None, :], [n_tokens - 1]
  if dump.ndim != 2:
    fail_input(f"{path}: shape {dump.shape} (want (vocab,) or (rows, vocab))")
  rows = dump.shape[0]
  if rows == n_tokens:
    return dump, list(range(n_tokens))
  if rows == len(stored_positions):
    return dump, list(stored_positions)
  if rows == 1:
    return dump, [n_tokens - 1]
  fail_input(f"{path}: {rows} rows for a prompt of {n_tokens} tokens (want {n_tokens}, "
             f"{len(stored_positions)} or 1)")
  return None, None


def summarize(cos, max_abs, kl, agree):
  return {
      "rows": int(len(cos)),
      "min_cosine": float(cos.min()),
      "mean_cosine": float(cos.mean()),
      "max_abs_diff": float(max_abs.max()),
      "mean_kl": float(kl.mean()),
      "max_kl": float(kl.max()),
      "top1_agree": int(agree.sum()),
  }


def compare_prompt(fixture_dir, prompt, dump_path, w_out):
  n = prompt["n_tokens"]
  dump, positions = dump_positions(load_npy(dump_path), n, prompt["logits_positions"], dump_path)
  vocab = dump.shape[1]
  result = {"index": prompt["index"], "name": prompt["name"], "n_tokens": n, "dump": dump_path,
            "positions": len(positions)}

  ref_rows = load_npy(os.path.join(fixture_dir, prompt["logits_file"]))
  if ref_rows.shape[1] != vocab:
    fail_input(f"{dump_path}: vocab {vocab}, fixture has {ref_rows.shape[1]}")
  pick = [(i, positions.index(p)) for i, p in enumerate(prompt["logits_positions"]) if p in positions]
  if pick:
    result["stored_rows"] = summarize(*row_metrics(ref_rows[[i for i, _ in pick]], dump[[j for _, j in pick]]))

  if w_out is not None and "hidden_file" in prompt:
    hidden = load_npy(os.path.join(fixture_dir, prompt["hidden_file"]))
    # float32 like the lm_head itself; a (vocab, d) matrix of a real model in float64 would not fit.
    rebuilt = (hidden[positions].astype(np.float32) @ w_out.T).astype(np.float64)
    result["all_positions"] = summarize(*row_metrics(rebuilt, dump))

  want = np.array([prompt["argmax"][p] for p in positions])
  got = dump.argmax(-1)
  bad = [int(p) for p, w, g in zip(positions, want, got) if w != g]
  result["argmax_agree"] = len(positions) - len(bad)
  result["argmax_mismatch_positions"] = bad
  return result


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument("fixture", help="fixture folder with oracle.json")
  parser.add_argument("--dump-dir", help="folder with logits_p<N>.npy files written by fak")
  parser.add_argument("--logits", action="append", default=[], metavar="N=FILE",
                      help="dumped logits of prompt N (repeatable)")
  parser.add_argument("--min-cosine", type=float, default=0.9999)
  parser.add_argument("--allow-argmax-mismatch", action="store_true")
  parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
  args = parser.parse_args()

  oracle_path = os.path.join(args.fixture, "oracle.json")
  try:
    with open(oracle_path) as f:
      oracle = json.load(f)
  except (OSError, ValueError) as e:
    fail_input(f"{oracle_path}: {e}")
  prompts = {p["index"]: p for p in oracle["prompts"]}

  dumps = {}
  for item in args.logits:
    index, _, path = item.partition("=")
    if not index.isdigit() or int(index) not in prompts or not path:
      fail_input(f"--logits {item!r}: want N=FILE with N one of {sorted(prompts)}")
    dumps[int(index)] = path
  if args.dump_dir:
    for index in prompts:
      path = os.path.join(args.dump_dir, f"logits_p{index}.npy")
      if os.path.exists(path):
        dumps.setdefault(index, path)
  if not dumps:
    fail_input("no dumped logits given (use --dump-dir or --logits)")

  w_out = output_matrix(args.fixture)
  results = [compare_prompt(args.fixture, prompts[i], dumps[i], w_out) for i in sorted(dumps)]

  ok = True
  for r in results:
    for key in ("stored_rows", "all_positions"):
      if key in r and not r[key]["min_cosine"] >= args.min_cosine:
        ok = False
    if r["argmax_mismatch_positions"] and not args.allow_argmax_mismatch:
      ok = False

  if args.json:
    print(json.dumps({"fixture": oracle["name"], "ok": ok, "min_cosine_required": args.min_cosine,
                      "prompts": results}, indent=1))
  else:
    print(f"{oracle['name']} ({oracle['hf_architecture']}), reference {oracle['reference']['dtype']} "
          f"transformers {oracle['reference']['transformers']}")
    print(f"{'prompt':<14}{'rows':>6}{'min cos':>12}{'max |diff|':>12}{'mean KL':>12}{'max KL':>12}"
          f"{'argmax':>10}")
    for r in results:
      s = r.get("all_positions") or r.get("stored_rows")
      label = f"p{r['index']} {r['name']}"
      print(f"{label:<14}{s['rows']:>6}{s['min_cosine']:>12.7f}{s['max_abs_diff']:>12.3e}{s['mean_kl']:>12.3e}"
            f"{s['max_kl']:>12.3e}{r['argmax_agree']:>6}/{r['positions']:<3}")
      if r["argmax_mismatch_positions"]:
        print(f"{'':<14}argmax differs at positions {r['argmax_mismatch_positions']}")
    print("PASS" if ok else f"FAIL (cosine >= {args.min_cosine} and argmax at every position required)")
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
