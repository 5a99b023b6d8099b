"""Run on 4 ranks by test_sharded_checkpoint.py: a tensor-parallel checkpoint saved by 4 ranks
(weights split along rows or columns, norms broadcast, Adam moments like their weights) is
loaded into a ZeRO layout on ranks [0, 1] (weights broadcast, moments split along rows).
Prints, per rank and tensor, the bytes it read, its shard and its peak rises (oneflow.cpu and
resident memory); the test checks that the ranks read each byte of the files once and that no
rank rises above 1.3x its shard."""

import os
import sys

import numpy as np

import oneflow as flow
import oneflow._sharded_checkpoint as sc

S, B = flow.sbp.split, flow.sbp.broadcast
rank = flow.env.get_rank()
assert flow.env.get_world_size() == 4
ALL = flow.placement("cpu", ranks=[0, 1, 2, 3])
ZERO = flow.placement("cpu", ranks=[0, 1])
folder = sys.argv[1]
N = 1024  # 4 MiB float32 matrices
TP = {"w_in": S(1), "w_out": S(0), "norm": B}
SHAPES = {"w_in": (N, N), "w_out": (N, N), "norm": (N,)}

flow.manual_seed(1)
state = {}
for name, sbp in TP.items():
    for kind in ("", ".exp_avg", ".exp_avg_sq"):
        state[name + kind] = flow.randn(*SHAPES[name], placement=ALL, sbp=sbp)
want = {k: v.numpy() for k, v in state.items()}
path = os.path.join(folder, "tp4")
flow.save(state, path, sharded=True)
files = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path) if f.endswith(".bin"))
del state


def rss_reset():
    with open("/proc/self/clear_refs", "w") as f:  # resets VmHWM, the peak resident set
        f.write("5")


def rss(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(field)


lazy = flow.load(path)
read_total = 0
for key in sorted(lazy):
    sbp = B if "exp_avg" not in key else S(0)  # ZeRO: weights whole, optimizer state split
    like = flow.empty(*SHAPES[key.split(".")[0]], placement=ZERO, sbp=sbp)
    flow.comm.barrier()
    before_read = sc.bytes_read[0]
    flow.cpu.reset_peak_memory_stats()
    base = flow.cpu.memory_allocated()
    rss_reset()
    rss_base = rss("VmRSS")
    got = sc.materialize_like(lazy[key], like)
    rise = flow.cpu.max_memory_allocated() - base
    rss_rise = rss("VmHWM") - rss_base
    read = sc.bytes_read[0] - before_read
    read_total += read
    shard = got.to_local().numel() * 4 if rank < 2 else 0
    assert got.sbp == (sbp,) and got.placement == ZERO
    np.testing.assert_array_equal(got.numpy(), want[key], err_msg=f"rank {rank}: {key}")
    print(f"rank {rank} load {key}: read {read} bytes, shard {shard} bytes, peak {rise} bytes, "
          f"resident peak {rss_rise} bytes", flush=True)
print(f"rank {rank} read {read_total} bytes of {files} in the files", flush=True)

# A 2x2 mesh with a broadcast dimension, (B, S(1)): the ranks along it read disjoint parts
MESH = flow.placement("cpu", ranks=[[0, 1], [2, 3]])
before_read = sc.bytes_read[0]
got = sc.materialize_like(lazy["w_out"], flow.empty(N, N, placement=MESH, sbp=(B, S(1))))
assert got.sbp == (B, S(1))
np.testing.assert_array_equal(got.numpy(), want["w_out"], err_msg=f"rank {rank}: mesh load")
print(f"rank {rank} mesh load read {sc.bytes_read[0] - before_read} bytes of {N * N * 4}",
      flush=True)
