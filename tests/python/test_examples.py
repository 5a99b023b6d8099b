"""The examples run as a user runs them: through tools/python, in a fresh process."""

import os
import re
import subprocess

from test_comm import free_port

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = os.path.join(REPO, "tools", "python")


def run(*args):
    return subprocess.run([PYTHON, *args], capture_output=True, text=True, timeout=600, cwd="/")


def test_main_job_trains_digits_to_95_percent_on_two_ranks():
    # What tools/main runs (without its apt step): the launcher with 2 ranks.
    port = str(free_port())
    r = run("-m", "oneflow.distributed.launch", "--nproc_per_node", "2", "--master_port", port,
            os.path.join(REPO, "examples", "train_digits.py"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(l.startswith("[rank 0] ") for l in lines), "only rank 0 prints"
    assert "2 rank(s) on cpu" in lines[0]
    assert re.match(r"\[rank 0\] epoch +1  loss \d+\.\d+  train acc \d\.\d+  [\d,]+ samples/s", lines[1])
    acc = float(re.search(r"test accuracy: (\d\.\d+)", r.stdout).group(1))
    assert acc >= 0.95


def test_main_job_runs_in_one_process_too():
    r = run(os.path.join(REPO, "examples", "train_digits.py"), "--epochs", "20")
    assert r.returncode == 0, r.stderr
    assert "1 rank(s) on cpu" in r.stdout
    assert float(re.search(r"test accuracy: (\d\.\d+)", r.stdout).group(1)) >= 0.95


def test_main_job_missing_data_is_one_clear_line(tmp_path):
    r = run(os.path.join(REPO, "examples", "train_digits.py"), "--data", str(tmp_path / "nope.csv.gz"))
    assert r.returncode != 0
    assert "train_digits: " + str(tmp_path / "nope.csv.gz") + " is missing" in r.stderr
