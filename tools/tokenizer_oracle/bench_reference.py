#!/usr/bin/env python3
"""Encode throughput of the reference tokenizers on the benchmark corpus, for docs/bench/tokenizer.md.

  build/tokenizer/fak_tokenizer_bench --dump /tmp/corpus.txt
  RAYON_NUM_THREADS=1 .venv/bin/python tools/tokenizer_oracle/bench_reference.py /tmp/corpus.txt

One call per document, one thread, best of three passes, as fak_tokenizer_bench measures.
"""

import sys
import time

import sentencepiece
from tokenizers import Tokenizer


def best_of(fn, docs, passes=3):
    best, count = 1e30, 0
    for _ in range(passes):
        t = time.perf_counter()
        count = sum(len(fn(d)) for d in docs)
        best = min(best, time.perf_counter() - t)
    return best, count


def main():
    docs = [line.rstrip("\n").replace("\\n", "\n").replace("\\\\", "\\")
            for line in open(sys.argv[1], encoding="utf-8")]
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    qwen = Tokenizer.from_file("../shared/fixtures/tokenizers/qwen3/tokenizer.json")
    s, n = best_of(lambda d: qwen.encode(d, add_special_tokens=False).ids, docs)
    print(f"tokenizers qwen3: {n} tokens, {nbytes / 1e6 / s:.1f} MB/s")
    sp = sentencepiece.SentencePieceProcessor(model_file="../shared/fixtures/tokenizers/llama2/tokenizer.model")
    s, n = best_of(sp.encode, docs)
    print(f"sentencepiece llama2: {n} tokens, {nbytes / 1e6 / s:.1f} MB/s")


if __name__ == "__main__":
    main()
