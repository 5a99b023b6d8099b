"""The stand-in CUDA device (ONEFLOW_FAKE_CUDA=1, core/device.h): "cuda" tensors in host memory
running the CPU kernels, cuda in every other respect; never on unless asked. The multi-rank
suites use it for their [cuda] cases (test_comm.launch(device="cuda")); here its own behaviour:
queries, memory statistics, mixed precision and errors (tests/python/dist/fake_cuda_checks.py,
in a process started with the variable set), and that it stays off by default."""

import os
import subprocess
import sys

import oneflow as flow
from test_comm import DIST, env_with


def _run(**env):
    return subprocess.run([sys.executable, os.path.join(DIST, "fake_cuda_checks.py")],
                          env=env_with(**env), capture_output=True, text=True, timeout=300)


def test_the_stand_in_device_answers_as_a_gpu_would():
    r = _run(ONEFLOW_FAKE_CUDA="1", ONEFLOW_FAKE_CUDA_DEVICES="2")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0] == "fake True available True count 2 reason ''"
    assert lines[1:] == ["memory statistics ok", "mixed precision ok", "errors ok"]


def test_it_is_off_unless_asked():
    if flow.cuda.is_available():  # a GPU: the real device answers
        assert not flow.cuda.is_fake()
        return
    assert not flow.cuda.is_fake() and flow.cuda.device_count() == 0
    assert flow.cuda.unavailable_reason() != ""
    assert flow.cuda.memory_allocated() == 0 and flow.cuda.max_memory_allocated() == 0
    assert flow.cuda.memory_stats()["num_ooms"] == 0


def test_a_bad_device_count_is_one_line():
    r = subprocess.run([sys.executable, "-c", "import oneflow as f; f.cuda.device_count()"],
                       env=env_with(ONEFLOW_FAKE_CUDA="1", ONEFLOW_FAKE_CUDA_DEVICES="lots"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert ("ONEFLOW_FAKE_CUDA_DEVICES: expected a device count from 1 to 1024, got 'lots'"
            in r.stderr), r.stderr[-2000:]
