"""Placement changes where either side is a 2-D mesh, on 4 ranks: every layout pair of a few
N-D and 1-D layouts gives the right value (partial sums add up to the whole), and the plan
moves only pieces (a point-to-point route; nothing gathered to broadcast first). Prints
'rank R nd routes ok'."""

import itertools

import numpy as np

import oneflow as flow
from device import DEVICE  # noqa: E402

rank = flow.env.get_rank()
assert flow.env.get_world_size() == 4
B, P, S = flow.sbp.broadcast, flow.sbp.partial_sum, flow.sbp.split
whole = np.arange(6 * 4, dtype=np.float32).reshape(6, 4) - 7
mesh = flow.placement(DEVICE, ranks=[[0, 1], [2, 3]])
column = flow.placement(DEVICE, ranks=[[1], [3]])
line = flow.placement(DEVICE, ranks=[1, 2, 3])
pair = flow.placement(DEVICE, ranks=[0, 2])
layouts = {
    mesh: [(S(0), S(0)), (S(0), S(1)), (B, S(1)), (P, S(0)), (B, B), (S(1), P)],
    column: [(S(0), B), (P, S(1))],
    line: [(S(0),), (B,), (P,)],
    pair: [(S(1),), (P,)],
}


def source(placement, sbp):
    """whole under (placement, sbp): broadcast first, then local steps only (B -> S slices,
    B -> P keeps the value on the first coordinate)."""
    return flow.tensor(whole, placement=placement, sbp=[B] * len(sbp)).to_global(sbp=list(sbp))


checked = 0
for (sp, sbps), (dp, dbps) in itertools.product(layouts.items(), repeat=2):
    if sp == dp or (sp.ranks.ndim == 1 and dp.ranks.ndim == 1):
        continue
    for a, b in itertools.product(sbps, dbps):
        u = source(sp, a).to_global(placement=dp, sbp=list(b))
        assert u.placement == dp and tuple(u.sbp) == tuple(b), (u.placement, u.sbp)
        got = u.numpy()  # gathers (partial dimensions summed) onto every rank
        assert np.array_equal(got, whole), (sp, a, dp, b, got)
        checked += 1
# The planner's route for these changes: pieces only, never a broadcast of the whole first.
plan = flow._C.boxing_plan(mesh, (S(0), S(0)), pair, (S(1),), [6, 4])
assert "point-to-point pieces" in plan[0] and "all_gather" not in plan[0], plan
assert checked == 104, checked
print(f"rank {rank} nd routes ok", flush=True)
