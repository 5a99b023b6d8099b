"""A nanoGPT-style GPT written as a PyTorch script (examples/nanogpt_block.py) trains under
oneflow (through mock_torch: `import torch` gives oneflow) to the same losses as under PyTorch
from the same weights: 20 steps of AdamW with weight-decay groups, clip_grad_norm_ and a cosine
schedule, then top-k + multinomial sampling."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from test_comm import env_with

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "nanogpt_block.py")


def _run(args, mock):
    env = env_with()
    cmd = [sys.executable, SCRIPT] + args
    if mock:
        line = subprocess.run([sys.executable, "-m", "oneflow.mock_torch"], env=env,
                              capture_output=True, text=True, check=True).stdout
        cmd = ["bash", "-c", f'{line.strip()} && exec "$0" "$@"'] + cmd
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def torch_run():
    return _run(["--steps", "20"], mock=False)


@pytest.mark.parametrize("attention", ["tril_mask", "sdpa"])
def test_gpt_trains_like_pytorch(torch_run, attention):
    args = ["--steps", "20"] + (["--sdpa"] if attention == "sdpa" else [])
    ours = _run(args, mock=True)
    np.testing.assert_allclose(ours["losses"], torch_run["losses"], rtol=1e-4)
    np.testing.assert_allclose(ours["grad_norms"], torch_run["grad_norms"], rtol=1e-4)
    np.testing.assert_allclose(ours["lm_head"], torch_run["lm_head"], rtol=1e-4, atol=1e-4)
    # It learns: the loss of the last steps is well below the first.
    assert np.mean(ours["losses"][-3:]) < ours["losses"][0] - 0.3
