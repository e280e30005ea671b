#!/usr/bin/env python3
"""Greedy parity between fak and llama.cpp on the same GGUF files (standard library only).

For each model and each of the first N prompts of a prompt set it records the greedy continuation of
fak (f16 and f32 KV cache) and of llama.cpp in several configurations (flash attention auto/off, f16
and f32 KV cache), then compares them pairwise: identical continuations, the first differing step,
and llama.cpp's top-1/top-2 margin there. It also replays each fak continuation through llama.cpp
(teacher forcing) and counts the steps where llama.cpp, given fak's context, picks fak's token; the
same replay of one llama.cpp configuration through another gives llama.cpp's own noise floor.

  python3 tools/llamacpp_ref/parity.py --fak build/apps/fak/fak --tool BUILD/llamacpp_greedy \
      --model q8_0.gguf --model q4_k_m.gguf --out docs/llamacpp-parity.json
"""

import argparse
import json
import subprocess
import sys
import time



def tokenize(fak, model, text):
  r = subprocess.run([fak, "tokenize", "-m", model, "--ids", text], capture_output=True, text=True, check=True)
  return json.loads(r.stdout)


def fak_greedy(fak, model, text, n, kv, threads):
  r = subprocess.run([fak, "run", "-m", model, "-p", text, "-n", str(n), "--temp", "0", "--ignore-eos",
                      "--print-ids", "-t", str(threads), "--kv-type", kv], capture_output=True, text=True,
                     errors="replace")  # a random model's text may end inside a UTF-8 sequence
  if r.returncode != 0:
    sys.exit(f"fak run failed: {r.stderr[-1000:]}")
  line = [l for l in r.stderr.splitlines() if l.startswith('{"output_ids"')][-1]
  return json.loads(line)


def llama(tool, model, n, fa, kv, threads, lines):
  r = subprocess.run([tool, model, str(n), fa, kv, str(threads)], input="\n".join(lines) + "\n",
                     capture_output=True, text=True, errors="replace")
  if r.returncode != 0:
    sys.exit(f"llamacpp_greedy failed: {r.stderr[-1000:]}")
  out = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
  if len(out) != len(lines):
    sys.exit(f"llamacpp_greedy answered {len(out)} of {len(lines)} requests")
  return out


def first_difference(a, b):
  return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a), len(b)))


def compare(name, a, b, margins):
  """a, b: lists of token lists; margins: llama.cpp margins along b (the reference side)."""
  rows, same = [], 0
  for i, (x, y) in enumerate(zip(a, b)):
    d = first_difference(x, y)
    same += d is None
    rows.append({"prompt": i, "identical": d is None, "first_difference": d,
                 "reference_margin_there": None if d is None else margins[i][d]})
  return {"pair": name, "identical": same, "prompts": len(rows), "rows": rows}


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--fak", required=True)
  ap.add_argument("--tool", required=True, help="llamacpp_greedy built against llama.cpp")
  ap.add_argument("--model", action="append", required=True)
  ap.add_argument("--prompts", default="bench/prompts/prompts-v1.jsonl")
  ap.add_argument("--n-prompts", type=int, default=10)
  ap.add_argument("--gen", type=int, default=32)
  ap.add_argument("--threads", type=int, default=2)
  ap.add_argument("--fak-kv", default="f16,f32", help="fak KV cache types to run")
  ap.add_argument("--llama-configs", default="auto:f16,off:f16,off:f32",
                  help="llama.cpp flash-attention:KV-type configurations; the first is the reference")
  ap.add_argument("--out", required=True)
  a = ap.parse_args()
  texts = [json.loads(l)["text"] for l in open(a.prompts, encoding="utf-8") if l.strip()][:a.n_prompts]
  report = {"schema": "fak.llamacpp_parity.v1", "prompts_file": a.prompts, "n_prompts": len(texts),
            "gen": a.gen, "threads": a.threads, "models": []}
  for model in a.model:
    t0 = time.time()
    ids = [tokenize(a.fak, model, t) for t in texts]
    lines = [" ".join(map(str, p)) for p in ids]
    fak = {}
    fak_kvs = a.fak_kv.split(",")
    for kv in fak_kvs:
      runs = [fak_greedy(a.fak, model, t, a.gen, kv, a.threads) for t in texts]
      for r, p in zip(runs, ids):
        if r["prompt_ids"] != p:
          sys.exit(f"fak run tokenized a prompt differently from fak tokenize: {r['prompt_ids']} vs {p}")
      fak[kv] = [r["output_ids"] for r in runs]
    configs = [tuple(c.split(":")) for c in a.llama_configs.split(",")]
    lc = {cfg: llama(a.tool, model, a.gen, cfg[0], cfg[1], a.threads, lines) for cfg in configs}
    tok = {cfg: [r["tokens"] for r in v] for cfg, v in lc.items()}
    mar = {cfg: [r["margins"] for r in v] for cfg, v in lc.items()}
    d = configs[0]

    def label(cfg):
      return f"llama.cpp (flash attention {cfg[0]}, {cfg[1]} KV)"

    pairs = []
    for kv in fak_kvs:
      for cfg in configs:
        if cfg == d or cfg == ("off", kv):
          pairs.append(compare(f"fak ({kv} KV) vs {label(cfg)}", fak[kv], tok[cfg], mar[cfg]))
    for cfg in configs[1:]:
      pairs.append(compare(f"{label(cfg)} vs {label(d)}", tok[cfg], tok[d], mar[d]))
    # Teacher forcing: the reference configuration, shown each other continuation, picks the same token?
    forced = {}
    others = [(f"fak ({kv} KV)", fak[kv]) for kv in fak_kvs] + [(label(c), tok[c]) for c in configs[1:]]
    for name, seqs in others:
      res = llama(a.tool, model, a.gen, d[0], d[1], a.threads,
                  [f"{l} | {' '.join(map(str, s))}" for l, s in zip(lines, seqs)])
      agree = total = 0
      disagreement_margins = []
      for r, s in zip(res, seqs):
        for k, (x, y) in enumerate(zip(r["argmax"], s)):
          total += 1
          if x == y:
            agree += 1
          else:
            disagreement_margins.append(r["margins"][k])
      forced[name] = {"steps": total, "reference_agrees": agree,
                      "max_reference_margin_where_it_disagrees": max(disagreement_margins, default=None)}
    all_margins = sorted(m for ms in mar[d] for m in ms)
    report["models"].append({
        "model": model.rsplit("/", 1)[-1], "reference": label(d), "pairs": pairs,
        "teacher_forced_by_reference": forced,
        "reference_margin_quantiles": {q: all_margins[int(q * (len(all_margins) - 1))]
                                               for q in (0.05, 0.1, 0.25, 0.5)},
        "fak": fak, "llama_cpp": {f"fa={c[0]},kv={c[1]}": tok[c] for c in configs},
        "seconds": round(time.time() - t0, 1)})
    print(f"{model}:")
    for p in pairs:
      print(f"  {p['identical']}/{p['prompts']} identical: {p['pair']}; first differences "
            f"{[r['first_difference'] for r in p['rows']]}")
    for name, f in forced.items():
      print(f"  teacher-forced {name}: {label(d)} agrees at {f['reference_agrees']}/{f['steps']} steps"
            f" (largest margin where it disagrees: {f['max_reference_margin_where_it_disagrees']})")
    sys.stdout.flush()
  with open(a.out, "w", encoding="utf-8") as f:
    json.dump(report, f, indent=1)
    f.write("\n")


if __name__ == "__main__":
  main()
