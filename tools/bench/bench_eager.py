"""Eager overhead: 1-element `a + b` per op, and `import` time, oneflow vs PyTorch.

    tools/python tools/bench/bench_eager.py [--quick] [--json OUT.json]

add:    µs per `a + b` on two float32 tensors of one element (no grad), in a tight Python
        loop; median over repeats. Both frameworks run in this process, one thread.
import: seconds for `import oneflow` / `import torch`, each in a fresh
        `tools/python -c ...` process timed inside with time.perf_counter around the import;
        one untimed run first (warms the file cache, triggers any rebuild), then median of 5.
"""

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median, pin_single_thread, save_results  # noqa: E402

pin_single_thread()  # before oneflow / torch are imported (children inherit it too)

import oneflow as flow  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

TOOLS_PYTHON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")


def add_us_per_op(libs, loops, repeats):
    """{name: median µs per `a + b`}; the frameworks' repeats alternate."""
    pairs = {name: (lib.tensor([1.0]), lib.tensor([2.0])) for name, lib in libs.items()}
    times = {name: [] for name in libs}
    for rep in range(repeats + 1):  # the first round is warm-up
        for name, (a, b) in pairs.items():
            start = time.perf_counter()
            for _ in range(loops):
                c = a + b
            c.item()  # waits for any queued work
            if rep > 0:
                times[name].append((time.perf_counter() - start) / loops * 1e6)
    return {name: median(t) for name, t in times.items()}


def import_seconds(module, runs):
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"

    def once():
        out = subprocess.run([TOOLS_PYTHON, "-c", code], check=True, capture_output=True, text=True).stdout
        return float(out.split()[-1])

    once()  # untimed
    return median([once() for _ in range(runs)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer loops and repeats")
    parser.add_argument("--json", help="write result rows here (for run_all.sh)")
    args = parser.parse_args()
    loops, repeats = (20_000, 5) if args.quick else (100_000, 9)

    add = add_us_per_op({"ours": flow, "torch": torch}, loops, repeats)
    print(f"add (1 elem)  µs/op  ours {add['ours']:.3f}  torch {add['torch']:.3f}  "
          f"speedup {add['torch'] / add['ours']:.2f}x")

    imp = {"ours": import_seconds("oneflow", 5), "torch": import_seconds("torch", 5)}
    print(f"import        s      ours {imp['ours']:.3f}  torch {imp['torch']:.3f}  "
          f"speedup {imp['torch'] / imp['ours']:.2f}x")

    save_results(args.json, [
        {"metric": "add 1-elem", "unit": "us/op", "ours": add["ours"], "torch": add["torch"],
         "higher_is_better": False, "target": {"op": "<=", "value": 2.5, "on": "ours"}},
        {"metric": "import", "unit": "s", "ours": imp["ours"], "torch": imp["torch"],
         "higher_is_better": False, "target": {"op": "<", "value": 0.3, "on": "ours"}},
    ])


if __name__ == "__main__":
    main()
