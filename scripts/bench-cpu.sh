#!/usr/bin/env bash
# fak against llama.cpp on the same GGUF files, llama-bench shapes (pp256, tg64), 2 threads.
# Usage: scripts/bench-cpu.sh LLAMA_BENCH MODEL.gguf [MODEL.gguf ...]
# The two engines run in alternating rounds (fak, llama.cpp, fak, llama.cpp, ...; FAK_BENCH_ROUNDS,
# default 3, each of FAK_BENCH_REPS repetitions, default 5), because the memory bandwidth of a shared
# machine drifts within minutes: each round's ratio compares measurements taken a minute apart, and
# the summary gives the median of the per-round ratios next to the ratio of the engines' best rounds.
# Prints one markdown table per model.
set -euo pipefail
cd "$(dirname "$0")/.."
llama_bench=$1
shift
threads=${FAK_BENCH_THREADS:-2}
reps=${FAK_BENCH_REPS:-5}
rounds=${FAK_BENCH_ROUNDS:-3}
for model in "$@"; do
  echo "### $(basename "$model")  ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
  results=()
  for ((r = 0; r < rounds; ++r)); do
    results+=("$(./build/apps/fak/fak bench -m "$model" -p 256 -n 64 -r "$reps" -t "$threads" --json)")
    results+=("$("$llama_bench" -m "$model" -p 256 -n 64 -r "$reps" -t "$threads" -o json 2>/dev/null)")
  done
  python3 - "${results[@]}" <<'PY'
import json, statistics, sys
args = sys.argv[1:]
rounds = []
for i in range(0, len(args), 2):
    fj, ll = json.loads(args[i]), json.loads(args[i + 1])
    fak = {r["test"]: r for r in fj["results"]}
    lc = {("pp%d" % r["n_prompt"]) if r["n_gen"] == 0 else ("tg%d" % r["n_gen"]): r for r in ll}
    rounds.append((fj, fak, lc))
print("| round | test | fak tok/s | llama.cpp tok/s | fak / llama.cpp |")
print("|---:|---|---:|---:|---:|")
tests = ["pp256", "tg64"]
for k, (fj, fak, lc) in enumerate(rounds):
    for t in tests:
        f, l = fak[t], lc[t]
        print("| %d | %s | %.2f ± %.2f | %.2f ± %.2f | %.2fx |" % (k + 1, t, f["tokens_per_second"], f["stddev"],
              l["avg_ts"], l["stddev_ts"], f["tokens_per_second"] / l["avg_ts"]))
print()
print("| test | median of round ratios | best fak round | best llama.cpp round | best / best |")
print("|---|---:|---:|---:|---:|")
for t in tests:
    ratios = [fak[t]["tokens_per_second"] / lc[t]["avg_ts"] for _, fak, lc in rounds]
    bf = max(fak[t]["tokens_per_second"] for _, fak, _ in rounds)
    bl = max(lc[t]["avg_ts"] for _, _, lc in rounds)
    print("| %s | %.2fx | %.2f | %.2f | %.2fx |" % (t, statistics.median(ratios), bf, bl, bf / bl))
fj = rounds[-1][0]
step = fj["decode_step_bytes"]
bf = max(fak["tg64"]["tokens_per_second"] for _, fak, _ in rounds)
bl = max(lc["tg64"]["avg_ts"] for _, _, lc in rounds)
print("\nweights read per decode step %.2f GB: fak's best tg64 round moves %.1f GB/s, llama.cpp's %.1f GB/s; "
      "fak load %.2f s, peak RSS %.0f MiB" % (step / 1e9, bf * step / 1e9, bl * step / 1e9, fj["load_seconds"],
                                               fj["peak_rss_mib"]))
PY
  echo
done
