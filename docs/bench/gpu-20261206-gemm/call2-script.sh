#!/bin/bash
# fak (GEMM eight warps for every format; logits buffers made at start) against llama.cpp CUDA in the same run:
# 1.5B Q8_0 and Q4_K_M pp512/tg128 (two rounds, alternating); the fleet burst (fak bench fleet, step budgets
# 512 and 256) and one burst with fak serve's per-step debug log; ncu of the 1.5B gate/up GEMM at 512 rows
# while the 27B hybrid is synthesized; then the 27B Q4_K_M pp512/tg32 against llama.cpp (unless SKIP27=1).
set -u
FINAL=${OUT:-/tmp/out}; OUT=$FINAL/raw; mkdir -p $OUT
P=$FINAL/progress.txt
trap 'tar -C $FINAL -czf $FINAL/raw.tgz raw && rm -rf $FINAL/raw' EXIT
trap 'exit 1' TERM INT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
log() { echo "$(date -u +%T) +$(el)s $*" >> $P; }
log start
scripts/test-cuda.sh unpack > $OUT/unpack.txt 2>&1 || log unpack-failed
mkdir -p /tmp/ll && python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-llama/llama.tar.xz /tmp/ll
CUDALIB=$(dirname $(find /usr/local/cuda*/ /usr/lib -name 'libcublas.so*' 2>/dev/null | head -1))
export LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB
export FAK_SYNTH_TOKENIZER=$PWD/.cuda-run/shared/fixtures/tokenizers/qwen3
F=$PWD/.cuda-run/bin/fak
L=/tmp/ll/llama/llama-bench
$L --version > $OUT/llama-version.txt 2>&1; head -2 $OUT/llama-version.txt >> $P
M=$(scripts/test-cuda.sh models-dir); mkdir -p $M
OUT=$OUT/b15 LLAMA_BENCH=$L ROUNDS=2 timeout 150 scripts/bench-cuda.sh > $OUT/b15.txt 2>&1
log b15 rc=$?
tail -16 $OUT/b15/summary.md >> $P
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
Q8=$M/qwen2.5-1.5b-q8_0.gguf
# One burst with the server's per-step log (a stdlib Python client: 1 agent, then 31 at once), twice.
FAK_LOG=debug $F serve -m $Q8 --backend cuda --parallel 32 --step-tokens 512 --port 18231 > $OUT/serve-stdout.txt 2> $OUT/serve-debug.txt &
SP=$!
timeout 60 python3 - > $OUT/burst-trace.txt 2>&1 <<'PY'
import importlib.util, json, random, http.client
spec = importlib.util.spec_from_file_location("bf", "scripts/bench-fleet.py"); bf = importlib.util.module_from_spec(spec); spec.loader.exec_module(bf)
class P:
    def poll(self): return None
bf.wait_health(18231, P(), 120)
c = http.client.HTTPConnection("127.0.0.1", 18231, timeout=10); c.request("GET", "/v1/models")
mid = json.loads(c.getresponse().read())["data"][0]["id"]
rng = random.Random(7)
pre = bf.text(rng, 1800)
tasks = [bf.text(rng, 26) for _ in range(32)]
for rep in range(2):
    r = bf.run_scenario("burst", 18231, mid, pre + (" v%d" % rep), tasks, 32)
    print(json.dumps({k: r[k] for k in ("first_ttft_ms", "rest_ttft_ms_p50", "rest_ttft_ms_p95", "rest_ttft_ms_max", "aggregate_decode_tps", "wall_s", "prompt_tokens", "cached_tokens", "ttft_ms")}))
PY
log trace rc=$? $(cut -c1-120 $OUT/burst-trace.txt | head -3 | tr '\n' ' ')
kill $SP; wait $SP 2>/dev/null
for st in 512 256; do
  timeout 60 $F bench fleet -m $Q8 --agents 32 --preamble 2048 --task 30 --gen 32 -t 16 --rounds 2 --scenarios burst \
    --serve-args "--backend cuda --step-tokens $st" --name st$st --out $OUT/fleet --report -q > $OUT/fleet-$st.txt 2>&1
  log fleet st=$st rc=$? $(grep -h -E "^\| fak-serve \| [0-9]" $OUT/fleet/by-machine/*/*st$st-burst/report.md 2>/dev/null | head -2 | tr '\n' ' ')
done
if [ "${SKIP27:-0}" = 1 ]; then log end; exit 0; fi
( $F synth --geometry qwen3.5-27b --type q4_k_m -o $M/tmp27.gguf > $OUT/synth27.txt 2>&1 && mv $M/tmp27.gguf $M/qwen3.5-27b-q4_k_m.gguf; echo done > $M/27b.done ) &
if command -v ncu > /dev/null; then
  for t in q8_0 q4_k q6_k; do
    timeout 40 ncu --set full -k regex:GemmKernel --launch-skip 2 --launch-count 1 $F bench kernels --backend cuda --batch 512 --type $t --shape 1.5b-gate-up:8960+8960x1536 --rounds 1 --seconds 0.01 > $OUT/ncu-gemm-1.5b-gate-up-$t.txt 2>&1
    log ncu $t rc=$? $(grep -E '^ +(Duration|Issue Slots Busy|Registers Per Thread|Achieved Occupancy|No Eligible|Shared Memory Throughput) ' $OUT/ncu-gemm-1.5b-gate-up-$t.txt | awk '{print $NF}' | tr '\n' ' ')
  done
fi
while [ ! -f $M/27b.done ] && [ $(el) -lt 400 ]; do sleep 2; done
log synth27 $(tail -1 $OUT/synth27.txt)
export LD_LIBRARY_PATH=/tmp/ll/llama:$CUDALIB
[ -f $M/qwen3.5-27b-q4_k_m.gguf ] && OUT=$OUT/b27 GEOMETRIES=qwen3.5-27b TYPES=q4_k_m N=32 R=2 LLAMA_BENCH=$L ROUNDS=1 timeout 110 scripts/bench-cuda.sh > $OUT/b27.txt 2>&1
log b27 rc=$?
tail -8 $OUT/b27/summary.md >> $P
log end
