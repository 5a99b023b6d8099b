#!/usr/bin/env bash
# Runs the oneflow-vs-PyTorch benchmarks and prints one table with the targets:
#
#   tools/bench/run_all.sh           # full run (about 1.5 minutes on the 2-core machine of README.md)
#   tools/bench/run_all.sh --quick   # shorter windows (under a minute)
#
# "PyTorch" is PyPI's newest release (its version in the header), in a venv the benchmarks make
# once and reuse (tools/bench/common.py: ~/.cache/oneflow_bench_venv, $ONEFLOW_BENCH_VENV), run in
# its own processes beside ours; bench_bf16's, bench_gpt_parallel's and bench_allreduce's PyTorch
# columns are still Debian's 1.13 in our process (their rows say so).
# Rows: MLP / LeNet training throughput, eager, and the MLP compiled (ours nn.Graph against
# torch.compile) (bench_train.py; it fails the run when the two
# frameworks' logits, loss or gradients differ on the first batch), 1-element add overhead and
# import time (bench_eager.py), 2-rank all_reduce from 4 KiB to 64 MiB (bench_allreduce.py: ours
# through shared memory and ours over Gloo TCP with ONEFLOW_SHM=0, each against PyTorch's gloo
# over TCP, so the framework and the transport differences show separately), 2-rank DDP
# training of the MLP and LeNet against PyTorch DDP (bench_ddp.py, the same two ways, and
# global-tensor data parallelism), the overhead of a global op against the same op on the
# local shard (bench_global_op.py: both columns are ours), a GPT block's training step at
# GPT-small shapes, eager with a tril mask and with scaled_dot_product_attention, and ours
# nn.Graph against torch.compile (bench_gpt_step.py), bf16 matmul against our float32 (bench_bf16.py), the
# GPT under tensor / data / pipeline parallelism (bench_gpt_parallel.py: TP layer 2 ranks vs 1,
# DP against PyTorch DDP, the pipeline bubble), and on a machine with a GPU, issue 40's table
# on CUDA against PyTorch on the same GPU, each in its own process: per-op rows, matmul / conv,
# ResNet-50 and GPT training in fp32 and bf16 autocast (bench_cuda.py; without a GPU it prints
# why it skipped and adds no rows; a row whose result differs from PyTorch's is marked). Each table section is headed by what its two columns are.
# Each script can also be run alone; see their docstrings. Prints the CPU, core count and date
# first: figures from different machines are not comparable.
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
START=$SECONDS
TORCH_VERSION="$("$PY" "$HERE/common.py" torch-version)"
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//') (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "PyTorch $TORCH_VERSION from PyPI (CPU, one thread per process) against oneflow $(git -C "$HERE" rev-parse --short HEAD); load:$(uptime | sed 's/.*load average//')"

"$PY" "$HERE/bench_train.py" "${QUICK[@]}" --json "$TMP/train.json"
"$PY" "$HERE/bench_eager.py" "${QUICK[@]}" --json "$TMP/eager.json"
"$PY" "$HERE/bench_allreduce.py" "${QUICK[@]}" --json "$TMP/allreduce.json"
"$PY" "$HERE/bench_ddp.py" "${QUICK[@]}" --json "$TMP/ddp.json"
"$PY" "$HERE/bench_global_op.py" "${QUICK[@]}" --json "$TMP/global_op.json"
"$PY" "$HERE/bench_gpt_step.py" "${QUICK[@]}" --json "$TMP/gpt_step.json"
"$PY" "$HERE/bench_bf16.py" "${QUICK[@]}" --json "$TMP/bf16.json"
"$PY" "$HERE/bench_gpt_parallel.py" "${QUICK[@]}" --json "$TMP/gpt_parallel.json"
"$PY" "$HERE/bench_cuda.py" "${QUICK[@]}" --json "$TMP/cuda.json"
echo
"$PY" "$HERE/common.py" table "$TMP/train.json" "$TMP/eager.json" "$TMP/allreduce.json" \
  "$TMP/ddp.json" "$TMP/global_op.json" "$TMP/gpt_step.json" "$TMP/bf16.json" \
  "$TMP/gpt_parallel.json" "$TMP/cuda.json"
echo "run_all.sh: $((SECONDS - START)) s"
