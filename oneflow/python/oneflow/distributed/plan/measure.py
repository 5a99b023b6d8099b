"""This machine's profile, measured: `python3 -m oneflow.distributed.plan --measure-profile
out.json` starts 2 local CPU ranks through the launcher (_measure_rank.py), which time a GEMM, a
copy, an elementwise add, a tiny op (the per-kernel overhead) and all_reduces of 1 KiB and
16 MiB, and turns the medians into a profile (hardware.py's fields) for `--profile out.json
--devices_per_node 2`. Everything is measured, so every efficiency is 1. One host has no
inter-node link: inter_node is a copy of intra_node, and the profile's sources say so.
Takes well under a minute (one launcher start, a few seconds of timing).
"""

import json
import os
import subprocess
import sys
import tempfile

from oneflow.distributed.plan.collectives import bytes_per_rank
from oneflow.distributed.plan.hardware import profile_from_dict

RANKS = 2
TIMEOUT_S = 120


def _memory_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("plan --measure-profile: /proc/meminfo has no MemTotal")


def profile_from_timings(t, memory_bytes):
    """A profile dict from _measure_rank.py's medians. The all_reduce over 2 ranks takes 2 ring
    steps: the 1 KiB one gives the latency, the 16 MiB one the bandwidth."""
    n = t["world_size"]
    latency = t["all_reduce_small_s"] / (2 * (n - 1))
    moved = bytes_per_rank("all_reduce", t["all_reduce_big_bytes"], n)
    bandwidth = moved / max(t["all_reduce_big_s"] - 2 * (n - 1) * latency, 1e-9)
    link = {"name": f"{n} local ranks (shared memory), measured", "bandwidth": bandwidth,
            "latency": latency, "efficiency": 1.0}
    gemm = t["gemm_flops"] / t["gemm_s"]
    return {
        "name": f"this machine's CPU ranks ({os.cpu_count()} cores, {n} ranks), measured",
        "memory_bytes": memory_bytes / n, "memory_reserved_bytes": 0.1 * memory_bytes / n,
        "memory_bandwidth": t["copy_bytes"] / t["copy_s"],
        "peak_flops": {"fp32": gemm},
        "vector_flops": t["add_elements"] / t["add_s"],
        "gemm_efficiency": 1.0, "memory_efficiency": 1.0,
        "kernel_overhead_s": t["tiny_s"],
        "intra_node": link, "inter_node": dict(link),
        "sources": "measured by python3 -m oneflow.distributed.plan --measure-profile "
                   f"({n} ranks through oneflow.distributed.launch; medians of a 512^3 fp32 GEMM, "
                   "a 32 MiB copy, an 8M-element add, a 1-element add, all_reduces of 1 KiB and "
                   "16 MiB); memory is this host's RAM over the ranks, 10% reserved; inter_node is "
                   "not measured (one host): a copy of intra_node",
        "timings": t,
    }


def main(out_path, log=sys.stdout):
    with tempfile.TemporaryDirectory(prefix="oneflow-measure-") as tmp:
        raw = os.path.join(tmp, "timings.json")
        cmd = [sys.executable, "-m", "oneflow.distributed.launch", "--nproc_per_node",
               str(RANKS), "-m", "oneflow.distributed.plan._measure_rank", raw]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"plan --measure-profile: the {RANKS} ranks did not finish in "
                             f"{TIMEOUT_S} s") from None
        if done.returncode != 0 or not os.path.exists(raw):
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-10:])
            raise SystemExit(f"plan --measure-profile: the {RANKS} ranks failed (exit "
                             f"{done.returncode}):\n{tail}")
        with open(raw) as f:
            timings = json.load(f)
    prof = profile_from_timings(timings, _memory_bytes())
    profile_from_dict(prof, out_path)  # what load_profile will read back must be complete
    with open(out_path, "w") as f:
        json.dump(prof, f, indent=2)
    print(f"wrote {out_path}: GEMM {prof['peak_flops']['fp32'] / 1e9:.1f} GFLOP/s, copy "
          f"{prof['memory_bandwidth'] / 1e9:.2f} GB/s, all_reduce {prof['intra_node']['bandwidth'] / 1e9:.2f} "
          f"GB/s and {prof['intra_node']['latency'] * 1e6:.0f} us a step, kernel overhead "
          f"{prof['kernel_overhead_s'] * 1e6:.0f} us", file=log)
