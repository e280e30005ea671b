# What every script that runs on a GPU machine begins with (docs/bench/*/call*-script.sh): sourced from
# the repository root there, with .cuda-run/ made here by `scripts/test-cuda.sh pack`.
#
#   . scripts/gpu-call.sh
#
# It sets, for the script that sources it:
#   L      seconds the whole script may take ($LIMIT, default 560): scale the guards with it, so that a
#          short remaining budget still brings back the first measurements;
#   OUT    a folder for raw files ($OUT/raw, packed into $OUT/raw.tgz when the script exits, so that one
#          file comes back whatever their number);
#   P      the progress log ($OUT/progress.txt), written line by line so that a machine taken back in
#          the middle still returns what was done;
#   F      the fak binary of the pack; M, the folder for synthesized models;
#   el     seconds since the start; log TEXT, a line in the progress log with the time and el.
#   llama_cuda, a function that unpacks llama.cpp's CUDA build (carried as .cuda-llama) and sets LLAMA_BENCH.
# The pack's libraries are on LD_LIBRARY_PATH and its tokenizer in FAK_SYNTH_TOKENIZER; the GPU, the
# binary's version and lscpu are logged.
set -u
L=${LIMIT:-560}
FINAL=${OUT:-/tmp/out}
OUT=$FINAL/raw
mkdir -p "$OUT"
P=$FINAL/progress.txt
trap 'tar -C "$FINAL" -czf "$FINAL/raw.tgz" raw && rm -rf "$FINAL/raw"' EXIT
trap 'exit 1' TERM INT
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
log() { echo "$(date -u +%T) +$(el)s $*" >> "$P"; }
log start
scripts/test-cuda.sh unpack > /dev/null 2>&1 || log unpack-failed
export LD_LIBRARY_PATH=$PWD/.cuda-run/lib
export FAK_SYNTH_TOKENIZER=$PWD/.cuda-run/shared/fixtures/tokenizers/qwen3
F=$PWD/.cuda-run/bin/fak
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >> "$P"
$F --version | head -1 >> "$P"
lscpu > "$OUT/lscpu.txt" 2>&1
M=$(scripts/test-cuda.sh models-dir)
mkdir -p "$M"

# llama.cpp's CUDA build, carried as .cuda-llama/llama.tar.xz: unpacked to /tmp/ll (kept while the machine
# stays warm), its libraries and the toolkit's cuBLAS put on LD_LIBRARY_PATH; LLAMA_BENCH names its
# llama-bench for scripts/bench-cuda.sh.
llama_cuda() {
  [ -x /tmp/ll/llama/llama-bench ] || { mkdir -p /tmp/ll && python3 -c \
    'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .cuda-llama/llama.tar.xz /tmp/ll; }
  local cudalib
  cudalib=$(dirname "$(find /usr/local/cuda*/ /usr/lib -name 'libcublas.so*' 2>/dev/null | head -1)")
  export LD_LIBRARY_PATH=/tmp/ll/llama:$cudalib:$LD_LIBRARY_PATH
  export LLAMA_BENCH=/tmp/ll/llama/llama-bench
}
