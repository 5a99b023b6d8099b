"""Placements that leave out ranks, on 4 ranks: the job's very first collective runs on a
placement without rank 0 (argv[1], e.g. "1,2"), then every 1-D conversion between placements
that contain, are contained in, overlap or are disjoint from each other, even and uneven shapes.
Each rank's local shard is compared with the slice it must hold (not only the gathered value).
Prints "rank R subset ok" and the slowest conversion."""

import itertools
import sys
import time

import numpy as np

import oneflow as flow
from device import DEVICE  # noqa: E402

rank = flow.env.get_rank()
assert flow.env.get_world_size() == 4
B, P, S = flow.sbp.broadcast, flow.sbp.partial_sum, flow.sbp.split


def expected_shard(whole, ranks, sbp):
    """This rank's local tensor of `whole` under placement ranks and 1-D sbp (None: no part)."""
    if rank not in ranks:
        return None
    i = sorted(ranks).index(rank)  # placements order their ranks (OneFlow's parallel ids)
    if sbp == B:
        return whole
    # Balanced split: part i has L // n + (i < L % n) elements (np.array_split's rule).
    return np.array_split(whole, len(ranks), axis=sbp.axis)[i]


def check(t, whole, ranks, sbp, what):
    local = t.to_local().numpy()
    if sbp == P:
        # Partial sum: the pieces of the placement's ranks add up to the whole.
        piece = flow.tensor(local if rank in ranks else np.zeros_like(whole))
        flow.comm.all_reduce(piece)
        assert np.array_equal(piece.numpy(), whole), (what, piece.numpy(), whole)
        return
    want = expected_shard(whole, ranks, sbp)
    if want is None:
        assert local.size == 0, (what, local.shape)
    else:
        assert local.shape == want.shape and np.array_equal(local, want), (what, local, want)


slowest = (0.0, "")


def timed(fn, what):
    global slowest
    start = time.perf_counter()
    out = fn()
    slowest = max(slowest, (time.perf_counter() - start, what))
    return out


# The very first collective of the job, on a placement without rank 0.
first = [int(r) for r in sys.argv[1].split(",")]
x = flow.ones(8, 4, placement=flow.placement(DEVICE, ranks=first), sbp=S(0))
y = timed(lambda: x.to_global(sbp=B), "first")
check(y, np.ones((8, 4), np.float32), first, B, f"first {first} S(0) -> B")

groups = [[0, 1, 2, 3], [1, 2], [2, 3], [1, 3], [0, 1], [3], [0, 2, 3], [2, 1]]
for shape in [(4, 6), (5, 3)]:
    whole = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 7
    for src, dst in itertools.product(groups, repeat=2):
        for a, b in itertools.product([S(0), S(1), B, P], repeat=2):
            what = f"{src} {a} -> {dst} {b} {shape}"
            t = flow.tensor(whole).to_global(placement=flow.placement(DEVICE, ranks=src), sbp=B)
            t = t.to_global(sbp=a)
            check(t, whole, src, a, what + " (source)")
            u = timed(lambda: t.to_global(placement=flow.placement(DEVICE, ranks=dst), sbp=b), what)
            check(u, whole, dst, b, what)
print(f"rank {rank} subset ok", flush=True)
print(f"rank {rank} slowest {slowest[0]:.3f} s: {slowest[1]}", flush=True)
