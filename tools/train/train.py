#!/usr/bin/env python3
"""Trains a small causal LM on the corpus of build_corpus.py and writes an HF checkpoint
(config.json + safetensors). Runs on a GPU machine with PyTorch and transformers; bf16 autocast,
AdamW, warmup then cosine decay. Stops at --minutes (or --steps) and saves a resumable state in
--state, so a longer run is several calls of at most ten minutes on a machine that stays warm.

  python3 tools/train/train.py --arch qwen3 --tokenizer tokenizer.json --data DATA --out OUT \
      [--hidden 128 --layers 4 --heads 4 --kv-heads 2 --head-dim 32 --ffn 384] [--minutes 6]
  python3 tools/train/train.py --arch llama --tokenizer tokenizer.model --vocab 32000 --bos 1 --eos 2 ...

A tokenizer.model is a SentencePiece model (Llama 2's); a tokenizer.json is read with `tokenizers`.
"""
import argparse
import gzip
import json
import math
import os
import time

import torch
import transformers
from tokenizers import Tokenizer


class SentencePiece:
    """A SentencePiece model (tokenizer.model) behind the `tokenizers` calls tokenize() makes."""

    def __init__(self, path):
        import sentencepiece
        self.sp = sentencepiece.SentencePieceProcessor(model_file=path)

    def encode_batch(self, pieces, add_special_tokens=False):
        class Enc:
            def __init__(self, ids):
                self.ids = ids
        return [Enc(ids) for ids in self.sp.encode(pieces)]


def tokenize(tok, path, eos):
    text = gzip.open(path, "rb").read().decode()
    pieces, step = [], 1 << 20
    start = 0
    while start < len(text):  # ~1 MB pieces cut at line ends, encoded in parallel
        end = text.find("\n", min(len(text), start + step))
        end = len(text) if end < 0 else end + 1
        pieces.append(text[start:end])
        start = end
    ids = []
    for enc in tok.encode_batch(pieces, add_special_tokens=False):
        ids.extend(enc.ids)
    ids.append(eos)
    return torch.tensor(ids, dtype=torch.int32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", choices=["qwen3", "llama"], default="qwen3")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--state", default="")
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--bos", type=int, default=151643)
    ap.add_argument("--eos", type=int, default=151643)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--ffn", type=int, default=384)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--total-steps", type=int, default=6000, help="the schedule's length")
    ap.add_argument("--minutes", type=float, default=6)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    dev = "cuda"

    tok = SentencePiece(args.tokenizer) if args.tokenizer.endswith(".model") else Tokenizer.from_file(args.tokenizer)
    t0 = time.time()
    train = tokenize(tok, os.path.join(args.data, "corpus.txt.gz"), args.eos)
    held = tokenize(tok, os.path.join(args.data, "heldout.txt.gz"), args.eos)
    print("tokens: train %d, held-out %d (%.0f s)" % (len(train), len(held), time.time() - t0), flush=True)
    train = train.to(dev)
    held = held.to(dev)

    common = dict(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.ffn,
                  num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                  head_dim=args.head_dim, max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=True,
                  bos_token_id=args.bos, eos_token_id=args.eos)
    if args.arch == "qwen3":
        cfg = transformers.Qwen3Config(rope_theta=1000000.0, **common)
        model = transformers.Qwen3ForCausalLM(cfg)
    else:
        cfg = transformers.LlamaConfig(rope_theta=10000.0, **common)
        model = transformers.LlamaForCausalLM(cfg)
    model.to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    print("parameters: %.2f M" % (n_params / 1e6), flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), fused=True)
    step, seen, log = 0, 0, []
    if args.state and os.path.exists(args.state):
        st = torch.load(args.state, map_location=dev)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, seen, log = st["step"], st["seen"], st["log"]
        torch.set_rng_state(st["rng"])
        print("resumed at step %d" % step, flush=True)

    def lr_at(s):
        if s < args.warmup:
            return args.lr * (s + 1) / args.warmup
        p = min(1.0, (s - args.warmup) / max(1, args.total_steps - args.warmup))
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))

    def batch(data, n):
        starts = torch.randint(0, len(data) - args.seq - 1, (n,), device=dev)
        idx = starts[:, None] + torch.arange(args.seq + 1, device=dev)[None, :]
        x = data[idx].long()
        return x[:, :-1], x[:, 1:]

    def loss_of(x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x).logits
        return torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))

    @torch.no_grad()
    def held_loss():
        model.eval()
        g = torch.Generator(device=dev).manual_seed(1234)
        total = 0.0
        for _ in range(8):
            starts = torch.randint(0, len(held) - args.seq - 1, (32,), device=dev, generator=g)
            idx = starts[:, None] + torch.arange(args.seq + 1, device=dev)[None, :]
            x = held[idx].long()
            total += loss_of(x[:, :-1], x[:, 1:]).item()
        model.train()
        return total / 8

    model.train()
    t_start = time.time()
    last = float("nan")
    while step < args.total_steps and time.time() - t_start < args.minutes * 60:
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x, y = batch(train, args.batch)
        loss = loss_of(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        seen += x.numel()
        if step % 100 == 0:
            last = loss.item()
            log.append({"step": step, "loss": last, "tokens": seen, "seconds": time.time() - t_start})
            print("step %d loss %.4f lr %.2e tokens %.1fM (%.0f s)" % (step, last, lr_at(step), seen / 1e6,
                                                                          time.time() - t_start), flush=True)
    hl = held_loss()
    print("held-out loss %.4f after %d steps, %.1fM tokens" % (hl, step, seen / 1e6), flush=True)
    if args.state:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "seen": seen, "log": log,
                    "rng": torch.get_rng_state()}, args.state)
    os.makedirs(args.out, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(args.out, safe_serialization=True, max_shard_size="14MB")
    json.dump({"arch": args.arch, "parameters": n_params, "steps": step, "tokens_seen": seen,
               "train_tokens": len(train), "heldout_tokens": len(held), "final_train_loss": last,
               "heldout_loss": hl, "seq": args.seq, "batch": args.batch, "lr": args.lr, "schedule_steps": args.total_steps,
               "log": log, "torch": torch.__version__, "transformers": transformers.__version__,
               "gpu": torch.cuda.get_device_name()},
              open(os.path.join(args.out, "train_log.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
