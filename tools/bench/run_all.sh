#!/usr/bin/env bash
# Runs the oneflow-vs-PyTorch benchmarks and prints one table with the targets:
#
#   tools/bench/run_all.sh           # full run (~30 s)
#   tools/bench/run_all.sh --quick   # shorter windows (~15 s)
#
# Rows: MLP / LeNet training throughput (bench_train.py), 1-element add overhead and
# import time (bench_eager.py), 2-rank all_reduce from 4 KiB to 64 MiB against torch.distributed
# gloo (bench_allreduce.py), 2-rank DDP training of the MLP and LeNet against PyTorch DDP
# (bench_ddp.py, also global-tensor data parallelism), the overhead of a global op against
# the same local op (bench_global_op.py; its "PyTorch" column is our local op), and on a machine
# with a GPU, matmul / conv2d TFLOP/s and LeNet / MobileNetV2 training on CUDA against PyTorch on
# the same GPU (bench_cuda.py; without a GPU it prints why it skipped and adds no rows). Each
# script can also be run alone; see their docstrings.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="$HERE/../python"

QUICK=()
case "${1:-}" in
  --quick) QUICK=(--quick) ;;
  "") ;;
  *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

"$PY" "$HERE/bench_train.py" "${QUICK[@]}" --json "$TMP/train.json"
"$PY" "$HERE/bench_eager.py" "${QUICK[@]}" --json "$TMP/eager.json"
"$PY" "$HERE/bench_allreduce.py" "${QUICK[@]}" --json "$TMP/allreduce.json"
"$PY" "$HERE/bench_ddp.py" "${QUICK[@]}" --json "$TMP/ddp.json"
"$PY" "$HERE/bench_global_op.py" "${QUICK[@]}" --json "$TMP/global_op.json"
"$PY" "$HERE/bench_cuda.py" "${QUICK[@]}" --json "$TMP/cuda.json"
echo
"$PY" "$HERE/common.py" table "$TMP/train.json" "$TMP/eager.json" "$TMP/allreduce.json" \
  "$TMP/ddp.json" "$TMP/global_op.json" "$TMP/cuda.json"
