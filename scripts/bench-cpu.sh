#!/usr/bin/env bash
# fak against llama.cpp on the same GGUF files, llama-bench shapes (pp256, tg64), 2 threads.
# Usage: scripts/bench-cpu.sh LLAMA_BENCH MODEL.gguf [MODEL.gguf ...]
# The engines run in alternating rounds (FAK_BENCH_ROUNDS, default 3, each of FAK_BENCH_REPS
# repetitions, default 5), because the memory bandwidth of a shared machine drifts within minutes:
# each round's ratio compares measurements taken a minute apart, and the summary gives the median of
# the per-round ratios next to the ratio of the engines' best rounds. Which engine goes first
# alternates from round to round.
# Each engine's number for a round is the median of its repetitions (llama-bench's mean would carry a cold
# first repetition, seen on its CUDA build: docs/bench/gpu.md).
# Control arms for the page size (FAK_BENCH_CONTROL=1, the default): fak copies weights into a
# huge-page arena while llama.cpp maps the file in 4 KiB pages, so each round also runs fak with
# --mmap (tensors used in place from the file mapping) and llama.cpp with -mmp 0 or, in newer builds,
# --load-mode none (weights read into memory); the summary gives the ratio within each setting.
# Prints one markdown table per model; the exact commands are printed first.
set -euo pipefail
cd "$(dirname "$0")/.."
llama_bench=$1
shift
threads=${FAK_BENCH_THREADS:-2}
reps=${FAK_BENCH_REPS:-5}
rounds=${FAK_BENCH_ROUNDS:-3}
control=${FAK_BENCH_CONTROL:-1}
fak_flags=(-p 256 -n 64 -r "$reps" -t "$threads" --json)
llama_flags=(-p 256 -n 64 -r "$reps" -t "$threads" -o json)
# Newer llama-bench builds replaced -mmp 0 by --load-mode none (weights read into memory).
no_mmap=(-mmp 0)
# (The help is read whole first: with pipefail, grep -q closing the pipe early fails the test.)
llama_help=$("$llama_bench" --help 2>&1 || true)
[[ $llama_help == *--load-mode* ]] && no_mmap=(--load-mode none)
echo "fak: build/apps/fak/fak bench -m MODEL ${fak_flags[*]}   (control arm: --mmap)"
echo "llama.cpp: $(basename "$llama_bench") -m MODEL ${llama_flags[*]}   (control arm: ${no_mmap[*]})"
echo
for model in "$@"; do
  echo "### $(basename "$model")  ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
  results=()
  run_llama() { "$llama_bench" -m "$model" "${llama_flags[@]}" "$@" 2>/dev/null; }
  for ((r = 0; r < rounds; ++r)); do
    fak_mmap='null'
    llama_read='null'
    if ((r % 2 == 0)); then
      fak_arena=$(./build/apps/fak/fak bench -m "$model" "${fak_flags[@]}")
      [ "$control" = 1 ] && fak_mmap=$(./build/apps/fak/fak bench -m "$model" "${fak_flags[@]}" --mmap)
      llama_mmap=$(run_llama)
      [ "$control" = 1 ] && llama_read=$(run_llama "${no_mmap[@]}")
    else
      llama_mmap=$(run_llama)
      [ "$control" = 1 ] && llama_read=$(run_llama "${no_mmap[@]}")
      fak_arena=$(./build/apps/fak/fak bench -m "$model" "${fak_flags[@]}")
      [ "$control" = 1 ] && fak_mmap=$(./build/apps/fak/fak bench -m "$model" "${fak_flags[@]}" --mmap)
    fi
    results+=("$fak_arena" "$fak_mmap" "$llama_mmap" "$llama_read")
  done
  python3 - "${results[@]}" <<'PY'
import json, statistics, sys
args = sys.argv[1:]
rounds = []
def lc_table(text):
    j = json.loads(text)
    if j is None:
        return None
    return {("pp%d" % r["n_prompt"]) if r["n_gen"] == 0 else ("tg%d" % r["n_gen"]): statistics.median(r.get("samples_ts") or [r["avg_ts"]]) for r in j}
def fak_table(text):
    j = json.loads(text)
    if j is None:
        return None, None
    return j, {r["test"]: statistics.median(r.get("samples") or [r["tokens_per_second"]]) for r in j["results"]}
for i in range(0, len(args), 4):
    fj, fa = fak_table(args[i])
    _, fm = fak_table(args[i + 1])
    rounds.append({"fj": fj, "fak": fa, "fak_mmap": fm, "llama": lc_table(args[i + 2]),
                   "llama_read": lc_table(args[i + 3])})
control = rounds[0]["fak_mmap"] is not None
tests = ["pp256", "tg64"]
if control:
    print("| round | first | test | fak (arena) | fak --mmap | llama.cpp (mmap) | llama.cpp no mmap |"
          " fak / llama.cpp | fak --mmap / llama.cpp | fak / llama.cpp no mmap |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
else:
    print("| round | first | test | fak tok/s | llama.cpp tok/s | fak / llama.cpp |")
    print("|---:|---|---|---:|---:|---:|")
for k, r in enumerate(rounds):
    first = "fak" if k % 2 == 0 else "llama.cpp"
    for t in tests:
        if control:
            print("| %d | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2fx | %.2fx | %.2fx |" % (
                k + 1, first, t, r["fak"][t], r["fak_mmap"][t], r["llama"][t], r["llama_read"][t],
                r["fak"][t] / r["llama"][t], r["fak_mmap"][t] / r["llama"][t], r["fak"][t] / r["llama_read"][t]))
        else:
            print("| %d | %s | %s | %.2f | %.2f | %.2fx |" % (k + 1, first, t, r["fak"][t], r["llama"][t],
                                                           r["fak"][t] / r["llama"][t]))
print()
pairs = [("fak (arena) / llama.cpp (mmap)", "fak", "llama")]
if control:
    pairs += [("fak --mmap / llama.cpp (mmap): both use the file mapping", "fak_mmap", "llama"),
              ("fak (arena) / llama.cpp without mmap: both read into memory", "fak", "llama_read")]
print("| comparison | test | median of round ratios | min | max | best / best |")
print("|---|---|---:|---:|---:|---:|")
for name, a, b in pairs:
    for t in tests:
        ratios = [r[a][t] / r[b][t] for r in rounds]
        best = max(r[a][t] for r in rounds) / max(r[b][t] for r in rounds)
        print("| %s | %s | %.2fx | %.2fx | %.2fx | %.2fx |" % (name, t, statistics.median(ratios), min(ratios),
                                                           max(ratios), best))
fj = rounds[-1]["fj"]
step = fj["decode_step_bytes"]
bf = max(r["fak"]["tg64"] for r in rounds)
bl = max(r["llama"]["tg64"] for r in rounds)
print("\nweights read per decode step %.2f GB: fak's best tg64 round moves %.1f GB/s, llama.cpp's %.1f GB/s; "
      "fak load %.2f s, peak RSS %.0f MiB" % (step / 1e9, bf * step / 1e9, bl * step / 1e9, fj["load_seconds"],
                                               fj["peak_rss_mib"]))
PY
  echo
done
