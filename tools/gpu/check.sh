#!/usr/bin/env bash
# Every GPU check in one command, for the few sessions lent a GPU (15 minutes of device time).
#
#   tools/gpu/check.sh pack     # here: builds the extension and the CUDA kernel test and packs
#                               # them with ../shared/gpu/make_bundle.sh into .gpu/ (ignored)
#   tools/gpu/check.sh [STEP...] # on the GPU machine (device tool: carry [".gpu"], timeout_s
#                               # ~480): each step below (or only the STEPs named: kernels
#                               # memcheck test_cuda cuda_suites bench_cuda
#                               # bench_cuda_graph) with its own time limit, one log and one
#                               # JSON summary under $OUT (or /tmp/gpu_check without $OUT)
#
# Steps: the kernel test with ONEFLOW_REQUIRE_CUDA=1 (every op's CUDA kernel against the CPU,
# gradients included), the same under compute-sanitizer's memcheck where the machine has it,
# tests/python/test_cuda.py, the [cuda] cases of the multi-rank suites, and
# tools/bench/bench_cuda.py (its JSON beside the log). A step
# that fails does not stop the others; the exit status is 1 when any failed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
if [[ "${1:-}" == pack ]]; then
  set -e
  tools/install_deps.sh
  bazel build //oneflow:_oneflow_internal.so //tests:cuda_kernels_test
  exec ../shared/gpu/make_bundle.sh .gpu tests/cuda_kernels_test
fi
[[ -f .gpu/bundle.tar.xz ]] || { echo "gpu/check: no .gpu/bundle.tar.xz (run 'tools/gpu/check.sh pack' here first and carry .gpu)"; exit 2; }
OUT="${OUT:-/tmp/gpu_check}"
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
: >"$LOG"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$LOG" 2>&1
STEPS=()
ONLY=" $* "
step() {  # step NAME SECONDS COMMAND (run inside the bundle: $PY, $BIN, $OFLIB)
  local name="$1" limit="$2" cmd="$3" start rc
  [[ "$ONLY" == "  " || "$ONLY" == *" $name "* ]] || return 0
  start=$(date +%s)
  echo "=== $name" >>"$LOG"
  timeout -k 10 "$limit" bash .gpu/run.sh "$cmd" >>"$LOG" 2>&1
  rc=$?
  echo "=== $name: exit $rc in $(($(date +%s) - start)) s" >>"$LOG"
  STEPS+=("{\"step\": \"$name\", \"exit\": $rc, \"seconds\": $(($(date +%s) - start))}")
}
step kernels 90 'ONEFLOW_REQUIRE_CUDA=1 LD_LIBRARY_PATH=$OFLIB $BIN/cuda_kernels_test'
if command -v compute-sanitizer >/dev/null || [[ -x /usr/local/cuda/bin/compute-sanitizer ]]; then
  step memcheck 150 'ONEFLOW_REQUIRE_CUDA=1 LD_LIBRARY_PATH=$OFLIB $(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer) --tool memcheck --error-exitcode 1 $BIN/cuda_kernels_test'
else
  echo "=== memcheck: compute-sanitizer not on this machine" >>"$LOG"
fi
step test_cuda 150 'ONEFLOW_REQUIRE_CUDA=1 $PY -m pytest -q -p no:cacheprovider --durations=8 tests/python/test_cuda.py'
step cuda_suites 180 '$PY -m pytest -q -p no:cacheprovider -x tests/python/test_global.py tests/python/test_gpt_parallel.py -k cuda'
if [[ -f tools/bench/bench_cuda.py ]]; then
  # ours under the bundle's Python, PyTorch under the machine's python3, each in its own process
  step bench_cuda 240 '$PY tools/bench/bench_cuda.py --quick --torch-python python3 --json '"$OUT"'/bench_cuda.json'
else
  echo "=== bench_cuda: tools/bench/bench_cuda.py does not exist yet" >>"$LOG"
fi
step bench_cuda_graph 120 '$PY tools/bench/bench_cuda_graph.py --quick --json '"$OUT"'/bench_cuda_graph.json'
(IFS=,; echo "[${STEPS[*]}]") >"$OUT/gpu_check.json"
tail -n 60 "$LOG"
! grep -q '"exit": [1-9]' "$OUT/gpu_check.json"
