"""all_reduce across two hosts: 4 ranks, 2 per host, on two network namespaces joined by a veth
pair (tools/two_hosts.py: a real TCP path between hosts, shared memory only inside each).
flow.comm against torch.distributed (gloo) on the same layout, side by side in one run.

    tools/python tools/bench/bench_multihost.py [--quick] [--json OUT.json]      (needs root)

Both frameworks are started by our launcher, one per host, exactly as for training (torch reads
the same torchrun variables; GLOO_SOCKET_IFNAME points its gloo at the veth). The worker is
bench_allreduce.py's (same sizes, warm-up, timed windows between barriers, median on rank 0).
Our path for a group spanning hosts is hierarchical (transport "shm+gloo"): all-reduce inside
each host through shared memory, once between the hosts over Gloo, then a broadcast inside
each host; the table says which path each size took.
"""

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from bench_allreduce import SIZES, label  # noqa: E402
from common import free_port, print_table, save_results  # noqa: E402
from two_hosts import TwoHosts, Unavailable  # noqa: E402


def run(hosts, framework, quick):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        args = [os.path.join(HERE, "bench_allreduce.py"), "--worker", framework, "--out", out]
        if quick:
            args.append("--quick")
        env = [{"GLOO_SOCKET_IFNAME": hosts.veth[h]} for h in (0, 1)]
        procs = hosts.job(*args, port=free_port(), env=env)
        for p in procs:
            stdout, stderr = p.communicate(timeout=900)
            if p.returncode != 0:
                sys.exit(f"bench_multihost: {framework} failed:\n{stdout[-2000:]}{stderr[-3000:]}")
        with open(out) as f:
            return {int(k): v for k, v in json.load(f).items()}


def transport(hosts):
    """The path our world group takes (printed by a 4-rank probe)."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.py")
        with open(probe, "w") as f:
            f.write("import oneflow as flow\n"
                    "flow.comm.all_reduce(flow.ones(1))\n"
                    "print('transport', flow.comm.transport())\n")
        procs = hosts.job(probe, port=free_port())
        outs = [p.communicate(timeout=120)[0] for p in procs]
    for line in outs[0].splitlines():
        if "transport " in line:
            return line.rsplit(" ", 1)[-1]
    return "?"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", help="write result rows here (for run_all.sh)")
    args = p.parse_args()
    hosts = TwoHosts()
    try:
        hosts.create()
    except Unavailable as e:
        print(f"bench_multihost: skipped: {e}")
        save_results(args.json, [])
        return
    try:
        path = transport(hosts)
        ours = run(hosts, "oneflow", args.quick)
        theirs = run(hosts, "torch", args.quick)
    finally:
        hosts.destroy()
    n = 4
    bus = lambda nbytes, t: nbytes * 2 * (n - 1) / n / t  # noqa: E731
    print(f"4 ranks on 2 hosts (2 each, veth between them); our path: {path}")
    print(f"{'size':>8} {'ours us':>10} {'torch us':>10} {'ours busbw GB/s':>16} "
          f"{'torch busbw GB/s':>17} {'ratio':>6}")
    rows = []
    for s in SIZES:
        print(f"{label(s):>8} {ours[s] * 1e6:10.1f} {theirs[s] * 1e6:10.1f} "
              f"{bus(s, ours[s]) / 1e9:16.2f} {bus(s, theirs[s]) / 1e9:17.2f} "
              f"{theirs[s] / ours[s]:6.2f}")
        target = ({"op": ">=", "value": 1.5, "on": "ratio"} if s >= 1 << 20 else
                  {"op": ">=", "value": 1.0, "on": "ratio"})
        rows.append({"metric": f"all_reduce 2 hosts x 2 ranks {label(s)} ({path})", "unit": "us",
                     "ours": ours[s] * 1e6, "torch": theirs[s] * 1e6,
                     "higher_is_better": False, "target": target})
    print()
    print_table(rows)
    save_results(args.json, rows)


if __name__ == "__main__":
    main()
