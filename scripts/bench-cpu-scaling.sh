#!/usr/bin/env bash
# fak against llama.cpp at several thread counts on the same GGUF files (pp256, tg64): the table of
# docs/bench/cpu-scaling.md.
# Usage: scripts/bench-cpu-scaling.sh LLAMA_BENCH MODEL.gguf [MODEL.gguf ...]
#   FAK=path/to/fak (default build/apps/fak/fak); FAK_BENCH_THREADS (default 1,2,4,8,16 capped at the
#   CPUs), FAK_BENCH_ROUNDS (default 2), FAK_BENCH_REPS (default 2).
# Each round runs every thread count; at each, both engines run back to back and which goes first
# alternates (by round and by thread count), because a shared machine's speed drifts within minutes.
# The summary takes the median over rounds of each engine's rate and of the per-round ratio.
# Parallel efficiency = rate at t threads / (t x rate at 1 thread). Its ceiling on this machine is the
# scaling of a register-only int8 loop (`fak bench kernels`), measured first at 1 and at the most
# threads: on a VM whose vCPUs share physical cores, or whose all-core clock is below its one-core
# clock, no compute-bound program scales past it. The decode columns give the bytes read per token
# times tokens/s against the machine's measured streaming-read bandwidth.
set -euo pipefail
cd "$(dirname "$0")/.."
llama_bench=$1
shift
fak=${FAK:-build/apps/fak/fak}
cpus=$(nproc)
threads=${FAK_BENCH_THREADS:-$(for t in 1 2 4 8 16; do if ((t <= cpus)); then echo "$t"; fi; done | paste -sd,)}
rounds=${FAK_BENCH_ROUNDS:-2}
reps=${FAK_BENCH_REPS:-2}
max_t=${threads##*,}
IFS=, read -r -a tlist <<< "$threads"

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $cpus CPUs"
echo "fak: $fak bench -m MODEL -p 256 -n 64 -r $reps -t T --json"
echo "llama.cpp: $(basename "$llama_bench") -m MODEL -p 256 -n 64 -r $reps -t T -o json"
echo "thread counts: $threads; rounds: $rounds"
peak1=$("$fak" bench kernels -t 1 --type q8_0 --matmul-only --seconds 0.5 | sed -n 's/^measured int8 peak: *\([0-9.]*\) GOPS.*/\1/p')
peakn=$("$fak" bench kernels -t "$max_t" --type q8_0 --matmul-only --seconds 0.5 | sed -n 's/^measured int8 peak: *\([0-9.]*\) GOPS.*/\1/p')
bw=$("$fak" bench kernels -t "$max_t" --type q8_0 --seconds 0.5 | sed -n 's/^measured read bandwidth: *\([0-9.]*\) GB\/s.*/\1/p')
echo "int8 peak: $peak1 GOPS on 1 thread, $peakn on $max_t; read bandwidth $bw GB/s on $max_t threads"
echo

for model in "$@"; do
  echo "### $(basename "$model")  ($(date -u +%FT%TZ))"
  results=()
  for ((r = 0; r < rounds; ++r)); do
    for i in "${!tlist[@]}"; do
      t=${tlist[$i]}
      run_fak() { "$fak" bench -m "$model" -p 256 -n 64 -r "$reps" -t "$t" --json 2>/dev/null; }
      run_llama() { "$llama_bench" -m "$model" -p 256 -n 64 -r "$reps" -t "$t" -o json 2>/dev/null; }
      if (((r + i) % 2 == 0)); then
        f=$(run_fak)
        l=$(run_llama)
      else
        l=$(run_llama)
        f=$(run_fak)
      fi
      results+=("$r" "$t" "$f" "$l")
    done
  done
  python3 - "$peak1" "$peakn" "$max_t" "$bw" "${results[@]}" <<'PY'
import json, statistics, sys
peak1, peakn, max_t, bw = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
args = sys.argv[5:]
rows = {}  # threads -> list of per-round dicts
step_bytes = None
for i in range(0, len(args), 4):
    t = int(args[i + 1])
    fj = json.loads(args[i + 2])
    step_bytes = fj["decode_step_bytes"]
    fak = {r["test"]: statistics.median(r.get("samples") or [r["tokens_per_second"]]) for r in fj["results"]}
    lj = json.loads(args[i + 3])
    llama = {("pp%d" % r["n_prompt"]) if r["n_gen"] == 0 else ("tg%d" % r["n_gen"]): statistics.median(r.get("samples_ts") or [r["avg_ts"]]) for r in lj}
    rows.setdefault(t, []).append({"fak": fak, "llama": llama})
med = lambda xs: statistics.median(xs)
def rate(t, eng, test):
    return med([r[eng][test] for r in rows[t]])
def ratio(t, test):
    return med([r["fak"][test] / r["llama"][test] for r in rows[t]])
ts = sorted(rows)
print("| threads | llama.cpp pp256 | fak pp256 | ratio | llama.cpp tg64 | fak tg64 | ratio | fak tg64 GB/s | % of read bw |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for t in ts:
    gbs = rate(t, "fak", "tg64") * step_bytes / 1e9
    print("| %d | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx | %.1f | %.0f%% |" % (
        t, rate(t, "llama", "pp256"), rate(t, "fak", "pp256"), ratio(t, "pp256"),
        rate(t, "llama", "tg64"), rate(t, "fak", "tg64"), ratio(t, "tg64"), gbs, 100 * gbs / bw))
if 1 in rows:
    print()
    print("| threads | fak pp256 efficiency | llama.cpp pp256 efficiency | fak tg64 efficiency | llama.cpp tg64 efficiency |")
    print("|---:|---:|---:|---:|---:|")
    for t in ts:
        eff = lambda eng, test: 100 * rate(t, eng, test) / (t * rate(1, eng, test))
        print("| %d | %.0f%% (%.1fx) | %.0f%% (%.1fx) | %.0f%% | %.0f%% |" % (
            t, eff("fak", "pp256"), rate(t, "fak", "pp256") / rate(1, "fak", "pp256"),
            eff("llama", "pp256"), rate(t, "llama", "pp256") / rate(1, "llama", "pp256"),
            eff("fak", "tg64"), eff("llama", "tg64")))
    print("\nceiling: the register-only int8 loop runs %.1fx faster on %d threads than on 1 (%.0f%% efficiency)" % (
        peakn / peak1, max_t, 100 * peakn / (peak1 * max_t)))
print("\nper-round samples (tok/s):")
for t in ts:
    for k, r in enumerate(rows[t]):
        print("  t=%d round %d: fak pp256 %.1f tg64 %.1f; llama.cpp pp256 %.1f tg64 %.1f" % (
            t, k + 1, r["fak"]["pp256"], r["fak"]["tg64"], r["llama"]["pp256"], r["llama"]["tg64"]))
PY
  echo
done
