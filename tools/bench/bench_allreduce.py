"""all_reduce of float32 tensors between 2 local ranks: flow.comm against torch.distributed
(gloo), side by side in one run, and against this machine's memory-copy bandwidth.

    tools/python tools/bench/bench_allreduce.py [--quick] [--json OUT.json]

Three runs, each under the launcher (python3 -m oneflow.distributed.launch --nproc_per_node 2,
which also sets torchrun's variables for torch's env:// rendezvous):
  ours, shm:   flow.comm between local ranks, through shared memory (the default);
  ours, Gloo:  flow.comm with ONEFLOW_SHM=0, through Gloo over loopback TCP;
  PyTorch:     torch.distributed's gloo backend, over loopback TCP.
So the table separates the two differences: ours over Gloo against PyTorch's gloo is the
framework (the same transport), ours through shared memory against ours over Gloo is the
transport. Per size: a warm-up, then several timed windows between barriers; the median time
per call on rank 0 is reported. Bus bandwidth = size * 2 (n - 1) / n / time, the bytes each
rank must move for an all-reduce; its fraction of single-thread memcpy bandwidth says how close
we are to the machine's limit.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median, pin_single_thread, print_table, run_workers, save_results  # noqa: E402

SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]


def label(nbytes):
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def worker(framework, out_path, quick):
    pin_single_thread()
    import numpy as np
    rank = int(os.environ["RANK"])
    if framework == "torch":
        import torch
        import torch.distributed as dist
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method="env://")
        make = lambda n: torch.ones(n, dtype=torch.float32)  # noqa: E731
        reduce_, barrier = dist.all_reduce, dist.barrier
    else:
        import oneflow as flow
        make = lambda n: flow.ones(n, dtype=flow.float32)  # noqa: E731
        reduce_, barrier = flow.comm.all_reduce, flow.comm.barrier
    budget = 0.1 if quick else 0.4
    results = {}
    for nbytes in SIZES:
        x = make(nbytes // 4)
        for _ in range(3):
            reduce_(x)
        # Every rank must make the same number of calls: the count depends on the size only
        # (a generous guess of the time per call, 50 us + 1 ns per byte).
        iters = max(3, min(20000, int(budget / 5 / (50e-6 + nbytes * 1e-9))))
        times = []
        for _ in range(5):
            barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                reduce_(x)
            times.append((time.perf_counter() - t0) / iters)
        # every rank of every framework held 1.0 + (allreduces so far)... check the math once
        y = make(16)
        reduce_(y)
        got = float(np.asarray(y.numpy())[0])
        assert got == float(os.environ["WORLD_SIZE"]), (nbytes, got)
        results[nbytes] = median(times)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({str(k): v for k, v in results.items()}, f)
    if framework == "torch":
        dist.destroy_process_group()


def run(framework, quick, env=None):
    results = run_workers(__file__, 2, framework, *(["--quick"] if quick else []), env=env)
    return {int(k): v for k, v in results.items()}


def memcpy_bandwidth():
    import numpy as np
    a = np.ones(64 << 18, dtype=np.float32)  # 64 MiB
    b = np.empty_like(a)
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        np.copyto(b, a)
        times.append(time.perf_counter() - t0)
    return a.nbytes / median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", help="write result rows here (for run_all.sh)")
    p.add_argument("--worker", choices=["oneflow", "torch"])
    p.add_argument("--out")
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args.out, args.quick)
    pin_single_thread()
    ours = run("oneflow", args.quick)
    gloo = run("oneflow", args.quick, env={"ONEFLOW_SHM": "0"})
    theirs = run("torch", args.quick)
    mem = memcpy_bandwidth()
    print(f"memcpy (one thread, 64 MiB): {mem / 1e9:.2f} GB/s")
    print(f"{'':>8} {'ours shm':>10} {'ours Gloo':>10} {'torch gloo':>11} {'framework':>10} "
          f"{'transport':>10} {'ours shm busbw':>15} {'of memcpy':>10}")
    print(f"{'size':>8} {'us':>10} {'us':>10} {'us':>11} {'torch/Gloo':>10} {'Gloo/shm':>10} "
          f"{'GB/s':>15} {'':>10}")
    for n in SIZES:
        bus = n * 2 * (2 - 1) / 2 / ours[n]
        print(f"{label(n):>8} {ours[n] * 1e6:10.1f} {gloo[n] * 1e6:10.1f} {theirs[n] * 1e6:11.1f} "
              f"{theirs[n] / gloo[n]:9.2f}x {gloo[n] / ours[n]:9.2f}x {bus / 1e9:15.2f} {bus / mem:10.0%}")
    rows = []
    for n in SIZES:  # what a user gets: ours by default against PyTorch's gloo
        target = ({"op": "<=", "value": 20, "on": "ours"} if n == 4 << 10 else
                  {"op": ">=", "value": 2.0, "on": "ratio"} if n >= 1 << 20 else
                  {"op": ">=", "value": 1.0, "on": "ratio"})
        rows.append({"metric": f"all_reduce 2 ranks {label(n)}", "unit": "us",
                     "ours": ours[n] * 1e6, "torch": theirs[n] * 1e6,
                     "ours_label": "ours, shm", "baseline": "PyTorch, gloo TCP",
                     "higher_is_better": False, "target": target})
    for n in SIZES:  # the framework difference: the same transport on both sides
        rows.append({"metric": f"all_reduce 2 ranks {label(n)}", "unit": "us",
                     "ours": gloo[n] * 1e6, "torch": theirs[n] * 1e6,
                     "ours_label": "ours, Gloo TCP", "baseline": "PyTorch, gloo TCP",
                     "higher_is_better": False, "target": {"op": ">=", "value": 0.8, "on": "ratio"}})
    for n in SIZES:  # the transport difference: the same framework on both sides
        rows.append({"metric": f"all_reduce 2 ranks {label(n)}", "unit": "us",
                     "ours": ours[n] * 1e6, "torch": gloo[n] * 1e6,
                     "ours_label": "ours, shm", "baseline": "ours, Gloo TCP",
                     "higher_is_better": False, "target": None})
    print()
    print_table(rows)
    save_results(args.json, rows)


if __name__ == "__main__":
    main()
