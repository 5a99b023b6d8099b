"""Distributed examples run through the launcher on 2 ranks, as a user runs them."""

import os
import re

from test_comm import ROOT, free_port, launch

EXAMPLES = os.path.join(ROOT, "examples")


def test_mobilenetv2_global_training_equals_one_process(tmp_path):
    data = tmp_path / "cifar10"
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(EXAMPLES, "mobilenetv2_global.py"), "--fake", "--data", data,
               "--fake-per-batch", 16, "--batch-size", 16, "--steps", 4, "--log-every", 1,
               "--check-local", timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    # Only rank 0 prints, and it printed a loss for each step, next to the local copy's.
    assert not any(l.startswith("[rank 1]") for l in lines), r.stdout
    steps = [re.search(r"step +(\d+)  loss (\d+\.\d+)  local (\d+\.\d+)", l) for l in lines]
    steps = [m for m in steps if m]
    assert [int(m.group(1)) for m in steps] == [1, 2, 3, 4], r.stdout
    assert all(abs(float(m.group(2)) - float(m.group(3))) <= 1e-4 for m in steps), r.stdout
    assert re.search(r"epoch 1  train loss \d+\.\d+  train acc \d\.\d+  test loss \d+\.\d+  "
                     r"test acc \d\.\d+", r.stdout), r.stdout
    m = re.search(r"global vs local: max \|loss difference\| over 4 steps = (\S+) \(agree, "
                  r"tolerance 1e-4\); max \|parameter difference\| = (\S+)", r.stdout)
    assert m, r.stdout
    assert float(m.group(1)) <= 1e-4 and float(m.group(2)) <= 1e-4, m.group(0)
    assert (data / "cifar-10-batches-bin" / "test_batch.bin").stat().st_size == 16 * 3073
