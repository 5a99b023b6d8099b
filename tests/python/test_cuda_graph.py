"""CUDA graphs on the stand-in CUDA device (ONEFLOW_FAKE_CUDA=1): eager capture
(flow.cuda.CUDAGraph, flow.cuda.graph, graph_pool_handle, make_graphed_callables) with its private
memory pool and its one-line refusals, and nn.Graph's config.enable_cuda_graph against eager training (an lr schedule
without recapture, dropout inside the capture (fresh masks each replay), Python numbers made once, a GradScaler skipping
and backing off, the fallback on the CPU), all in
tests/python/dist/cuda_graph_checks.py, in a process started with the variable set. The same
script runs on a GPU from test_cuda.py. The allocator's pools themselves: tests/core/
caching_allocator_test.cc."""

import os
import subprocess
import sys

from test_comm import DIST, env_with


def test_cuda_graphs_on_the_stand_in_device():
    r = subprocess.run([sys.executable, os.path.join(DIST, "cuda_graph_checks.py")],
                       env=env_with(ONEFLOW_FAKE_CUDA="1", ONEFLOW_FAKE_CUDA_DEVICES="1"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    oks = [line for line in r.stdout.splitlines() if line.endswith(" ok")]
    assert oks == ["eager capture ok", "shared pool ok", "refusals ok", "random ops in eager capture ok",
                   "make_graphed_callables ok", "graph equals eager ok",
                   "random ops captured ok", "constants ok", "grad scaler ok", "fallback ok"], r.stdout
