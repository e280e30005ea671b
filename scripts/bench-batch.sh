#!/usr/bin/env bash
# fak bench batch against llama.cpp's llama-batched-bench on the same GGUF file: B concurrent
# sequences with distinct prompts of P tokens, N generated tokens each, aggregate prefill and decode
# tok/s. The engines run in alternating rounds (fak, llama.cpp, fak, ...; FAK_BENCH_ROUNDS, default 3)
# because this machine's memory bandwidth drifts within minutes; the summary gives the median of the
# per-round ratios next to each engine's median.
# Usage: scripts/bench-batch.sh LLAMA_BATCHED_BENCH MODEL.gguf
# Environment: FAK_BENCH_THREADS (2), FAK_BENCH_P (128), FAK_BENCH_N (64), FAK_BENCH_B (1,2,4,8,16,32).
set -euo pipefail
cd "$(dirname "$0")/.."
llama=$1
model=$2
threads=${FAK_BENCH_THREADS:-2}
rounds=${FAK_BENCH_ROUNDS:-3}
p=${FAK_BENCH_P:-128}
n=${FAK_BENCH_N:-64}
b=${FAK_BENCH_B:-1,2,4,8,16,32}
echo "### $(basename "$model"), p=$p n=$n, $threads threads ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
results=()
for ((r = 0; r < rounds; ++r)); do
  results+=("$(./build/apps/fak/fak bench batch -m "$model" -p "$p" -n "$n" -b "$b" -t "$threads" -r 1 --json)")
  # The same shapes; -c holds every sequence, -ub 512 as fak's --ubatch default.
  results+=("$("$llama" -m "$model" -c 16384 -b 2048 -ub 512 -npp "$p" -ntg "$n" -npl "$b" -t "$threads" \
    --output-format jsonl 2>/dev/null | grep '^{')")
done
python3 - "${results[@]}" <<'PY'
import json, statistics, sys
args = sys.argv[1:]
rounds = []
for i in range(0, len(args), 2):
    fak = {r["batch"]: r for r in json.loads(args[i])["results"]}
    lc = {r["pl"]: r for r in (json.loads(l) for l in args[i + 1].splitlines() if l.strip())}
    rounds.append((fak, lc))
bs = sorted(rounds[0][0])
print("| B | fak prefill tok/s | llama.cpp prefill tok/s | ratio | fak decode tok/s | llama.cpp decode tok/s | ratio | fak ITL p50 / p95 ms |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for b in bs:
    fp = [f[b]["prefill_tok_s"] for f, _ in rounds]
    lp = [l[b]["speed_pp"] for _, l in rounds]
    fd = [f[b]["decode_tok_s"] for f, _ in rounds]
    ld = [l[b]["speed_tg"] for _, l in rounds]
    rp = statistics.median(x / y for x, y in zip(fp, lp))
    rd = statistics.median(x / y for x, y in zip(fd, ld))
    itl = rounds[-1][0][b]
    print("| %d | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx | %.1f / %.1f |" % (
        b, statistics.median(fp), statistics.median(lp), rp, statistics.median(fd), statistics.median(ld), rd,
        itl["itl_p50_ms"], itl["itl_p95_ms"]))
print()
print("per round (decode tok/s, fak / llama.cpp):")
for k, (f, l) in enumerate(rounds):
    print("  round %d: " % (k + 1) + ", ".join("B=%d %.1f/%.1f" % (b, f[b]["decode_tok_s"], l[b]["speed_tg"]) for b in bs))
one = statistics.median(f[1]["decode_tok_s"] for f, _ in rounds) if 1 in bs else None
if one:
    print("\nfak aggregate decode over its own B=1: " + ", ".join(
        "B=%d %.2fx" % (b, statistics.median(f[b]["decode_tok_s"] for f, _ in rounds) / one) for b in bs))
PY
