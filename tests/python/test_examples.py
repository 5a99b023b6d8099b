"""The examples run as a user runs them: through tools/python, in a fresh process."""

import os
import re
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = os.path.join(REPO, "tools", "python")


def run(*args):
    return subprocess.run([PYTHON, *args], capture_output=True, text=True, timeout=600, cwd="/")


def test_main_job_trains_digits_to_95_percent():
    r = run(os.path.join(REPO, "examples", "train_digits.py"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.match(r"epoch +1  loss \d+\.\d+  train acc \d\.\d+  [\d,]+ samples/s", lines[1])
    acc = float(re.search(r"test accuracy: (\d\.\d+)", r.stdout).group(1))
    assert acc >= 0.95


def test_main_job_missing_data_is_one_clear_line(tmp_path):
    r = run(os.path.join(REPO, "examples", "train_digits.py"), "--data", str(tmp_path / "nope.csv.gz"))
    assert r.returncode != 0
    assert "train_digits: " + str(tmp_path / "nope.csv.gz") + " is missing" in r.stderr
