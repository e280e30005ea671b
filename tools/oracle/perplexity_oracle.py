#!/usr/bin/env python3
"""transformers' next-token logits at the positions `fak perplexity` scores, against fak's own.

Runs `fak perplexity --dump-logits` on an HF checkpoint folder (weights widened to f32, `--quant f32`)
and transformers in float32 on the same token ids (from `fak tokenize`), chunk by chunk as perplexity
cuts them, and reports the cosine of each position's logits, the top-1 agreement and both engines'
perplexity. Needs torch and transformers (tools/oracle/requirements.txt); never run in CI.

  python3 tools/oracle/perplexity_oracle.py --fak build/apps/fak/fak --hf CHECKPOINT --text FILE \
      [-c 256] [--chunks 8] [--out result.json]
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import torch
import transformers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fak", required=True)
    ap.add_argument("--hf", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("-c", type=int, default=256)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ids = json.loads(subprocess.run([args.fak, "tokenize", "-m", args.hf, "-f", args.text, "--ids"],
                                    capture_output=True, text=True, check=True).stdout)
    dump = os.path.join(tempfile.mkdtemp(prefix="fak-ppl-oracle-"), "logits.npy")
    r = subprocess.run([args.fak, "perplexity", "-m", args.hf, "--quant", "f32", "-f", args.text, "-c", str(args.c),
                        "--chunks", str(args.chunks), "-t", str(args.threads), "--json", "--dump-logits", dump],
                       capture_output=True, text=True, check=True)
    fak = json.loads(r.stdout)
    got = np.load(dump)
    model = transformers.AutoModelForCausalLM.from_pretrained(args.hf, dtype=torch.float32)
    model.eval()
    c, first = args.c, args.c // 2
    # As fak perplexity (and llama-perplexity): when the tokenizer adds BOS, each chunk starts with it.
    bos = model.config.bos_token_id if ids and ids[0] == model.config.bos_token_id else None
    cos, agree, nll, rows = [], 0, 0.0, 0
    with torch.no_grad():
        for k in range(fak["chunks"]):
            chunk = ids[k * c:(k + 1) * c]
            if bos is not None:
                chunk = [bos] + chunk[1:]
            logits = model(input_ids=torch.tensor([chunk])).logits[0].double().numpy()
            for j in range(first, c - 1):
                a = logits[j]
                b = got[rows].astype(np.float64)
                cos.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
                agree += int(np.argmax(a) == np.argmax(b))
                lse = np.log(np.sum(np.exp(a - a.max()))) + a.max()
                nll += lse - a[chunk[j + 1]]
                rows += 1
    assert rows == got.shape[0], (rows, got.shape)
    res = {"hf": args.hf, "text": args.text, "ctx": c, "chunks": fak["chunks"], "positions": rows,
           "min_cosine": min(cos), "mean_cosine": float(np.mean(cos)), "top1_agreement": agree / rows,
           "fak_ppl": fak["ppl"], "transformers_ppl": float(np.exp(nll / rows)),
           "torch": torch.__version__, "transformers": transformers.__version__}
    print(json.dumps(res, indent=1))
    if args.out:
        json.dump(res, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
