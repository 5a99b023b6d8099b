"""Per-op overhead of global tensors: an op on 2 ranks whose signature needs no communication
(cached deduction, local kernel on the shard, wrap) against the same op on the local shard.

    tools/python tools/bench/bench_global_op.py [--quick] [--json OUT.json]

Ops on small tensors (so the figure is overhead, not arithmetic): add of two split(0) tensors,
relu of a split(0) tensor, matmul of split(0) by broadcast. The local reference runs the same
op on this rank's shard (the work the global op does after deduction). Medians over windows.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import median, pin_single_thread, print_table, run_workers, save_results  # noqa: E402,E501


def worker(out_path, quick):
    pin_single_thread()
    import oneflow as flow

    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    P = flow.placement("cpu", ranks=list(range(world)))
    S0, B = flow.sbp.split(0), flow.sbp.broadcast
    a, b, w = flow.randn(8, 16), flow.randn(8, 16), flow.randn(16, 16)
    ga, gb = a.to_global(placement=P, sbp=S0), b.to_global(placement=P, sbp=S0)
    gw = w.to_global(placement=P, sbp=B)
    cases = {
        "add": (lambda: ga + gb, lambda: a + b),
        "relu": (lambda: flow.relu(ga), lambda: flow.relu(a)),
        "matmul": (lambda: flow.matmul(ga, gw), lambda: flow.matmul(a, w)),
    }
    iters, windows = (2000, 5) if quick else (5000, 9)
    results = {}
    for name, (glob, loc) in cases.items():
        assert glob().sbp == (S0,)
        times = {"global": [], "local": []}
        for _ in range(windows):
            for kind, fn in (("global", glob), ("local", loc)):
                fn()
                t0 = time.perf_counter()
                for _ in range(iters):
                    fn()
                times[kind].append((time.perf_counter() - t0) / iters)
        results[name] = {k: median(v) for k, v in times.items()}
    flow.comm.barrier()
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(results, f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", help="write result rows here (for run_all.sh)")
    p.add_argument("--worker", action="store_true")
    p.add_argument("--out")
    args = p.parse_args()
    if args.worker:
        return worker(args.out, args.quick)
    results = run_workers(__file__, 2, *(["--quick"] if args.quick else []))
    rows = []
    for name, r in results.items():
        print(f"{name:7} global {r['global'] * 1e6:7.2f} us  local {r['local'] * 1e6:7.2f} us  "
              f"overhead {r['global'] / r['local']:.2f}x")
        # Not a comparison with PyTorch: the global op against our own op on the local shard
        # (the "torch" field holds the local op; the labels name both columns).
        what = {"add": "add, split(0) + split(0)", "relu": "relu, split(0)",
                "matmul": "matmul, split(0) x broadcast"}[name]
        rows.append({"metric": f"{what}, 2 ranks", "unit": "us",
                     "ours": r["global"] * 1e6, "torch": r["local"] * 1e6,
                     "ours_label": "global op", "baseline": "our local op",
                     "higher_is_better": False, "target": {"op": ">=", "value": 0.5, "on": "ratio"}})
    print()
    print_table(rows)
    save_results(args.json, rows)


if __name__ == "__main__":
    main()
