"""oneflow.cuda.set_sync_debug_mode on the stand-in CUDA device (ONEFLOW_FAKE_CUDA=1): its
host copies report as a GPU's host waits do, naming the op; a GPT step (fp32 and bf16
autocast, AdamW, clip_grad_norm, dropout) and a ResNet step run under "error", and a
deliberate host read inside the step raises (tests/python/dist/sync_debug_checks.py, in a
process started with the variable set; test_cuda.py runs the same script on a GPU)."""

import os
import subprocess
import sys

import pytest

from test_comm import DIST, env_with


def _run(*checks):
    return subprocess.run([sys.executable, os.path.join(DIST, "sync_debug_checks.py"), *checks],
                          env=env_with(ONEFLOW_FAKE_CUDA="1"), capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("check,line", [("modes", "modes ok"), ("reports", "reports ok"),
                                        ("gpt", "gpt step ok"), ("resnet", "resnet step ok")])
def test_on_the_stand_in_device(check, line):
    r = _run(check)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.splitlines() == [line], r.stdout
