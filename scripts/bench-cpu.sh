#!/usr/bin/env bash
# fak against llama.cpp on the same GGUF files, in the same run, llama-bench shapes (pp256, tg64),
# 2 threads. Usage: scripts/bench-cpu.sh LLAMA_BENCH MODEL.gguf [MODEL.gguf ...]
# Prints one markdown table per model with both engines' tok/s and the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
llama_bench=$1
shift
threads=${FAK_BENCH_THREADS:-2}
reps=${FAK_BENCH_REPS:-5}
for model in "$@"; do
  echo "### $(basename "$model")  ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
  fak_json=$(./build/apps/fak/fak bench -m "$model" -p 256 -n 64 -r "$reps" -t "$threads" --json)
  llama_json=$("$llama_bench" -m "$model" -p 256 -n 64 -r "$reps" -t "$threads" -o json 2>/dev/null)
  python3 - "$fak_json" "$llama_json" <<'PY'
import json, sys
fak = {r["test"]: r for r in json.loads(sys.argv[1])["results"]}
fj = json.loads(sys.argv[1])
ll = json.loads(sys.argv[2])
print("| test | fak tok/s | llama.cpp tok/s | fak / llama.cpp |")
print("|---|---:|---:|---:|")
for r in ll:
    test = ("pp%d" % r["n_prompt"]) if r["n_gen"] == 0 else ("tg%d" % r["n_gen"])
    f = fak[test]
    print("| %s | %.2f ± %.2f | %.2f ± %.2f | %.2fx |" % (test, f["tokens_per_second"], f["stddev"],
          r["avg_ts"], r["stddev_ts"], f["tokens_per_second"] / r["avg_ts"]))
tg = fak.get("tg64")
if tg:
    print("\nfak decode moves %.1f GB/s of weights; load %.2f s; peak RSS %.0f MiB" % (
        tg["tokens_per_second"] * fj["decode_step_bytes"] / 1e9, fj["load_seconds"], fj["peak_rss_mib"]))
PY
  echo
done
