#!/usr/bin/env bash
# fak's CUDA backend against llama.cpp's on the same GPU, in one run (docs/bench/gpu.md). On the GPU
# machine, from the repository root, with .cuda-run/ made here by `scripts/test-cuda.sh pack`:
#
#   OUT=results LLAMA_BENCH=/path/to/llama-bench scripts/bench-cuda.sh
#
# Models are synthesized there (fak synth, Qwen tokenizer, random weights: speed does not depend on
# them). Each round runs every fak variant and then llama-bench on each file, so slow drift of the
# machine touches both engines alike; the table at the end (also in $OUT/summary.md) gives each round's
# numbers and ratios, and for decode each engine's weight read (fak's decode_step_bytes x tok/s) as a
# share of the device copy bandwidth fak measured in that run. Variables: GEOMETRIES (qwen2.5-1.5b), TYPES (q8_0 q4_k_m), ROUNDS (2), P (512),
# N (128), R (3), VARIANTS (space-separated NAME=ENV pairs, ENV one or more comma-separated KEY=VALUE,
# e.g. "fak= nopdl=FAK_CUDA_PDL=0 old=FAK_CUDA_GEMM_SYNC=2,FAK_CUDA_CONV_SERIAL=1"; default "fak="), BASE_FAK (another fak binary, e.g. the previous commit's,
# run as the arm "base" after the variants: a control in the same run), LLAMA_BENCH (skipped when unset
# or missing); with LLAMA_BATCHED_BENCH, also batched decode of the q8_0 files, B sequences of BATCH_P prompt and
# BATCH_N new tokens each (fak bench batch against llama-batched-bench, prompts not shared; BATCHES,
# default 1,8,32); the summary then also sets fak's aggregate decode beside llama-batched-bench's S_TG per
# batch size and round, with the ratio.
set -uo pipefail
cd "$(dirname "$0")/.."
pack=.cuda-run
out=${OUT:-build/cuda-bench}
mkdir -p "$out"
scripts/test-cuda.sh unpack || exit 1
export LD_LIBRARY_PATH="$PWD/$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fak="$PWD/$pack/bin/fak"
tok="$pack/shared/fixtures/tokenizers/qwen3"
export FAK_SYNTH_TOKENIZER="$PWD/$tok"
models=$(scripts/test-cuda.sh models-dir)
mkdir -p "$models"
variants=${VARIANTS:-"fak="}
llama=${LLAMA_BENCH:-}
[ -n "$llama" ] && [ ! -x "$llama" ] && { echo "llama-bench not found at $llama: skipped"; llama=; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$out/gpu.txt"
"$fak" --version >> "$out/gpu.txt"
cat "$out/gpu.txt"

for geometry in ${GEOMETRIES:-qwen2.5-1.5b}; do
  for type in ${TYPES:-q8_0 q4_k_m}; do
    m="$models/$geometry-$type.gguf"
    [ -f "$m" ] || "$fak" synth --geometry "$geometry" --type "$type" -o "$m" > /dev/null || exit 1
  done
done

rc=0
for round in $(seq 1 "${ROUNDS:-2}"); do
  for geometry in ${GEOMETRIES:-qwen2.5-1.5b}; do
    for type in ${TYPES:-q8_0 q4_k_m}; do
      m="$models/$geometry-$type.gguf"
      for v in $variants; do
        name=${v%%=*}
        env_set=${v#*=}
        f="$out/$name-$geometry-$type-r$round.json"
        # shellcheck disable=SC2086  # KEY=VALUE settings, comma-separated
        env ${env_set:+${env_set//,/ }} "$fak" bench -m "$m" --backend cuda -p "${P:-512}" -n "${N:-128}" -r "${R:-3}" \
          --json > "$f" 2> "${f%.json}.err" || rc=1
      done
      if [ -n "${BASE_FAK:-}" ]; then
        f="$out/base-$geometry-$type-r$round.json"
        "$BASE_FAK" bench -m "$m" --backend cuda -p "${P:-512}" -n "${N:-128}" -r "${R:-3}" --json > "$f" \
          2> "${f%.json}.err" || rc=1
      fi
      if [ -n "$llama" ]; then
        f="$out/llama-$geometry-$type-r$round.json"
        "$llama" -m "$m" -ngl 99 -p "${P:-512}" -n "${N:-128}" -r "${R:-3}" -o json > "$f" 2> "${f%.json}.err" || rc=1
      fi
      batched=${LLAMA_BATCHED_BENCH:-}
      if [ -n "$batched" ] && [ "$type" = q8_0 ]; then
        bp=${BATCH_P:-128} bn=${BATCH_N:-64} bs=${BATCHES:-1,8,32}
        "$fak" bench batch -m "$m" --backend cuda -p "$bp" -n "$bn" -b "$bs" \
          > "$out/batch-fak-$geometry-$type-r$round.txt" 2>&1 || rc=1
        ctx=$(( (bp + bn) * ${bs##*,} + 256 ))
        "$batched" -m "$m" -ngl 99 -c "$ctx" -b 2048 -ub 512 -npp "$bp" -ntg "$bn" -npl "$bs" \
          > "$out/batch-llama-$geometry-$type-r$round.txt" 2>&1 || rc=1
      fi
    done
  done
done

# Each engine's number is the median of its repetitions: llama.cpp's first repetition of a prompt test
# runs cold (at the 1.5B geometry on an H100, 14,000-20,000 tok/s against 27,000-33,000 for the next
# two: docs/bench/gpu.md, 2026-12-07 call 12), which the mean would carry into the ratio; with R of 3
# or more the median is a warm one.
python3 - "$out" <<'EOF' | tee "$out/summary.md"
import glob, json, os, sys
from statistics import median
out = sys.argv[1]
rows = {}
roof = {}
cold = set()  # llama.cpp prompt tests with fewer than 3 repetitions: their median holds the cold one
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    base = os.path.basename(f)[:-5]
    if base == "gpu" or base.startswith("batch-"):
        continue
    engine, rest = base.split("-", 1)
    model, rnd = rest.rsplit("-r", 1)
    try:
        d = json.load(open(f))
    except Exception:
        continue
    if engine == "llama":
        for r in d:
            test = "pp%d" % r["n_prompt"] if r["n_gen"] == 0 else "tg%d" % r["n_gen"]
            rows.setdefault((model, test, rnd), {})[engine] = median(r.get("samples_ts") or [r["avg_ts"]])
            if r["n_gen"] == 0 and len(r.get("samples_ts") or []) < 3:
                cold.add(test)
    else:
        for r in d["results"]:
            rows.setdefault((model, r["test"], rnd), {})[engine] = median(r.get("samples") or [r["tokens_per_second"]])
        # fak measures the device copy bandwidth in the same run; a decode step reads decode_step_bytes.
        if d.get("bandwidth_gb_per_second", 0) > 0:
            roof[(model, rnd)] = (d["decode_step_bytes"], d["bandwidth_gb_per_second"])
engines = sorted({e for v in rows.values() for e in v}, key=lambda e: (e == "llama", e))
both = "llama" in engines and "fak" in engines
print("| model | test | round | " + " | ".join(engines) + (" | fak / llama.cpp |" if both else " |") +
      " share of the copy bandwidth (" + ", ".join(engines) + ") |")
for (model, test, rnd), v in sorted(rows.items()):
    cells = ["%.1f" % v[e] if e in v else "-" for e in engines]
    ratio = ""
    if both:
        ratio = " %.2f |" % (v["fak"] / v["llama"]) if "llama" in v and "fak" in v else " - |"
    share = ""
    if test.startswith("tg") and (model, rnd) in roof:
        step, bw = roof[(model, rnd)]
        share = ", ".join("%.0f%%" % (100 * v[e] * step / 1e9 / bw) if e in v else "-" for e in engines)
    print("| %s | %s | %s | %s |%s %s |" % (model, test, rnd, " | ".join(cells), ratio, share))
if cold:
    print("\nNote: llama.cpp's %s ran fewer than 3 repetitions, so its number above is the median of a cold"
          " first repetition and a warm one (take R >= 3, or its warm sample from the raw files)."
          % ", ".join(sorted(cold)))
EOF
for f in "$out"/batch-*.txt; do
  [ -f "$f" ] || continue
  echo "== $(basename "$f")"
  grep -E '^\|' "$f"
done | tee -a "$out/summary.md"
# Batched decode side by side: fak's aggregate decode tok/s against llama-batched-bench's S_TG.
python3 - "$out" <<'EOF' | tee -a "$out/summary.md"
import glob, os, re, sys
out = sys.argv[1]
got = {}
for f in glob.glob(os.path.join(out, "batch-*-r*.txt")):
    m = re.match(r"batch-(fak|llama)-(.+)-r(\d+)\.txt$", os.path.basename(f))
    if not m:
        continue
    engine, model, rnd = m.groups()
    for line in open(f):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not cells or not cells[0].isdigit():
            continue
        if engine == "fak" and len(cells) >= 5:  # B, p, n, prefill, decode, ...
            got.setdefault((model, int(cells[0]), int(rnd)), {})["fak"] = float(cells[4])
        elif engine == "llama" and len(cells) >= 8:  # PP, TG, B, N_KV, T_PP, S_PP, T_TG, S_TG, ...
            got.setdefault((model, int(cells[2]), int(rnd)), {})["llama"] = float(cells[7])
if got:
    print("| model | sequences | round | fak decode tok/s | llama-batched-bench S_TG | fak / llama.cpp |")
    for (model, b, rnd), v in sorted(got.items()):
        fak = "%.1f" % v["fak"] if "fak" in v else "-"
        llama = "%.1f" % v["llama"] if "llama" in v else "-"
        ratio = "%.2f" % (v["fak"] / v["llama"]) if "fak" in v and "llama" in v else "-"
        print("| %s | %d | %d | %s | %s | %s |" % (model, b, rnd, fak, llama, ratio))
EOF
exit $rc
