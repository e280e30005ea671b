#!/bin/bash
# First GPU run of 1583214 (padded GEMM scale rows), da2f01f (512-token serve steps beside a GPU) and 5a2eb76
# (graphs captured at a shape's second sighting): CUDA tests, kernel bench at 512 activation rows, 1.5B Q8_0 and
# Q4_K_M pp512/tg128, one fleet burst with the server's per-step debug log and the fleet bench at the default step.
set -u
FINAL=${OUT:-/tmp/out}; OUT=$FINAL/raw; mkdir -p $OUT
P=$FINAL/progress.txt
trap 'tar -C $FINAL -czf $FINAL/raw.tgz raw && rm -rf $FINAL/raw' EXIT
trap 'exit 1' TERM INT
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
log() { echo "$(date -u +%T) +$(el)s $*" >> $P; }
log start
scripts/test-cuda.sh unpack > $OUT/unpack.txt 2>&1 || log unpack-failed
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
export FAK_SYNTH_TOKENIZER=$PWD/.cuda-run/shared/fixtures/tokenizers/qwen3
F=$PWD/.cuda-run/bin/fak
T=$PWD/.cuda-run/bin/cuda_backend_test
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
cat $OUT/gpu.txt >> $P; $F --version | head -1 >> $P
M=/dev/shm/m; mkdir -p $M
( $F synth --geometry qwen2.5-1.5b --type q8_0 -o $M/q8.gguf > $OUT/synth.txt 2>&1
  $F synth --geometry qwen2.5-1.5b --type q4_k_m -o $M/q4.gguf >> $OUT/synth.txt 2>&1; echo done > $M/small.done ) &
timeout 150 $T > $OUT/tests.txt 2>&1; log tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')
grep -E '^\[  FAILED|Failure|Expected|Which is|mode |step [0-9]|differ' $OUT/tests.txt | head -20 >> $P
timeout 100 $F bench kernels --backend cuda --batch 512 --seconds 0.05 --rounds 2 > $OUT/kernels512.txt 2>&1
log kernels rc=$?
grep -E "^\|" $OUT/kernels512.txt | head -40 >> $P
while [ ! -f $M/small.done ] && [ $(el) -lt 300 ]; do sleep 2; done
log small-models-ready
for r in 1 2; do
  for m in q8 q4; do
    timeout 40 $F bench -m $M/$m.gguf --backend cuda -p 512 -n 128 -r 3 > $OUT/b-$m-r$r.txt 2>&1
    log $m r$r $(grep -E 'pp512|tg128' $OUT/b-$m-r$r.txt | awk -F'|' '{printf "%s %s %s;", $8, $9, $10}')
  done
done
FAK_LOG=debug $F serve -m $M/q8.gguf --backend cuda --parallel 32 --port 18231 > $OUT/serve-stdout.txt 2> $OUT/serve-debug.txt &
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
timeout 60 $F bench fleet -m $M/q8.gguf --agents 32 --preamble 2048 --task 30 --gen 32 -t 16 --rounds 2 --scenarios burst \
  --serve-args "--backend cuda" --name default --out $OUT/fleet --report -q > $OUT/fleet.txt 2>&1
log fleet rc=$? $(grep -h -E "^\| fak-serve \| [0-9]" $OUT/fleet/by-machine/*/*default-burst/report.md 2>/dev/null | head -2 | tr '\n' ' ')
log end
