"""Eager overhead: 1-element `a + b` per op, and `import` time, oneflow vs PyPI's PyTorch.

    tools/python tools/bench/bench_eager.py [--quick] [--json OUT.json]

add:    µs per `a + b` on two float32 tensors of one element (no grad), in a tight Python
        loop; median over repeats. Ours runs in this process, PyTorch in a worker process under
        common.torch_python()'s venv; their repeats alternate. One thread each.
import: seconds for `import oneflow` (a fresh `tools/python -c ...` process) and `import torch`
        (a fresh process of the venv's Python), timed inside with time.perf_counter around the
        import; one untimed run first (warms the file cache, triggers any rebuild), then the
        median of 5, the two alternating.
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import (TOOLS_PYTHON, Worker, median, pin_single_thread, save_results, serve,  # noqa: E402
                    torch_env, torch_python)

pin_single_thread()  # before oneflow / torch are imported (children inherit it too)


def add_loop(lib, loops):
    """µs per `a + b` over `loops` calls."""
    a, b = lib.tensor([1.0]), lib.tensor([2.0])
    start = time.perf_counter()
    for _ in range(loops):
        c = a + b
    c.item()  # waits for any queued work
    return (time.perf_counter() - start) / loops * 1e6


def worker():
    import torch

    torch.set_num_threads(1)
    serve({"add": lambda loops: {"us": add_loop(torch, loops)}}, {"version": torch.__version__})


def add_us_per_op(flow, theirs, loops, repeats):
    """{name: median µs per `a + b`}; the frameworks' repeats alternate."""
    times = {"ours": [], "torch": []}
    for rep in range(repeats + 1):  # the first round is warm-up
        ours = add_loop(flow, loops)
        torch_us = theirs.ask(cmd="add", loops=loops)["us"]
        if rep > 0:
            times["ours"].append(ours)
            times["torch"].append(torch_us)
    return {name: median(t) for name, t in times.items()}


def import_seconds(runs):
    """{"ours": s, "torch": s}: medians, the two frameworks' runs alternating."""
    cmds = {"ours": ([TOOLS_PYTHON], None, "oneflow"),
            "torch": ([torch_python()], torch_env(), "torch")}
    times = {name: [] for name in cmds}
    for rep in range(runs + 1):  # the first round is untimed
        for name, (python, env, module) in cmds.items():
            code = (f"import time; t = time.perf_counter(); import {module}; "
                    "print(time.perf_counter() - t)")
            out = subprocess.run([*python, "-c", code], check=True, capture_output=True,
                                 text=True, env=env).stdout
            if rep > 0:
                times[name].append(float(out.split()[-1]))
    return {name: median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer loops and repeats")
    parser.add_argument("--json", help="write result rows here (for run_all.sh)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker()
    loops, repeats = (20_000, 5) if args.quick else (100_000, 9)

    import oneflow as flow

    theirs = Worker(__file__, "torch")
    try:
        add = add_us_per_op(flow, theirs, loops, repeats)
    finally:
        theirs.close()
    print(f"add (1 elem)  µs/op  ours {add['ours']:.3f}  torch {add['torch']:.3f}  "
          f"speedup {add['torch'] / add['ours']:.2f}x")

    imp = import_seconds(5)
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
