"""One 1-D placement change per job, on 4 ranks, with no collective before it: argv = source
ranks, destination ranks, shape (e.g. "1,2" "0,1,2,3" "5,3"). For each of the 16 layout pairs
of S(0), S(1), B, P: the destination shards are the right slices (partial sums add up to the
whole), and no conversion takes a second or more (the first one of the job included). Prints
'rank R relation ok' and the slowest conversion."""

import itertools
import sys
import time

import numpy as np

import oneflow as flow
from device import DEVICE  # noqa: E402

rank = flow.env.get_rank()
assert flow.env.get_world_size() == 4
B, P, S = flow.sbp.broadcast, flow.sbp.partial_sum, flow.sbp.split
src = [int(r) for r in sys.argv[1].split(",")]
dst = [int(r) for r in sys.argv[2].split(",")]
shape = tuple(int(d) for d in sys.argv[3].split(","))
whole = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 5


def source(a):
    """The source tensor under layout a, built without any collective: B and S from the whole
    (each rank of src keeps its slice), P from per-rank pieces (src's first rank holds the whole,
    the others zeros) with the meta check and data sync off."""
    placement = flow.placement(DEVICE, src)
    if a == P:
        piece = whole if rank == src[0] else np.zeros_like(whole)
        return flow.tensor(piece).to_global(placement=placement, sbp=P, check_meta=False,
                                            sync_data=False)
    return flow.tensor(whole, placement=placement, sbp=a)


slowest = (0.0, "")
for a, b in itertools.product([S(0), S(1), B, P], repeat=2):
    t = source(a)
    start = time.perf_counter()
    u = t.to_global(placement=flow.placement(DEVICE, dst), sbp=b)
    took = time.perf_counter() - start
    slowest = max(slowest, (took, f"{a} -> {b}"))
    local = u.to_local().numpy()
    what = f"{src} {a} -> {dst} {b} {shape}"
    if rank not in dst:
        assert local.size == 0, (what, local.shape)
    elif b == P:
        pass  # checked below from the sum of the pieces
    elif b == B:
        assert np.array_equal(local, whole), (what, local)
    else:
        want = np.array_split(whole, len(dst), axis=b.axis)[dst.index(rank)]
        assert local.shape == want.shape and np.array_equal(local, want), (what, local, want)
    if b == P:
        piece = flow.tensor(local if rank in dst else np.zeros_like(whole))
        flow.comm.all_reduce(piece)
        assert np.array_equal(piece.numpy(), whole), (what, piece.numpy())
    assert took < 1.0, f"{what} took {took:.3f} s"
print(f"rank {rank} relation ok", flush=True)
print(f"rank {rank} slowest {slowest[0]:.3f} s: {slowest[1]}", flush=True)
