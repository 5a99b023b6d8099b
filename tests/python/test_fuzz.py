"""The fuzzer's quick mode (tools/fuzz/fuzz.py --quick): the corpus of past crashers and a fixed
sample of random calls over the public surface, each in a worker subprocess; fails on any crash,
hang or tensor whose size disagrees with its shape."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_fuzz_quick_finds_no_crash_hang_or_bad_size():
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "fuzz", "fuzz.py"), "--quick", "--show", "0"],
        capture_output=True, text=True, timeout=900)
    report = proc.stdout + proc.stderr
    assert "fuzz:" in report, report
    assert proc.returncode == 0, report
    assert " 0 crash, 0 hang" in report and " 0 bad," in report, report
