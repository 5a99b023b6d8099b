"""Run on 4 ranks by test_big_models.py: every route of the boxing table, on one placement, on a
2 x 2 mesh and between placements, gives the right values and raises no rank's peak memory
(oneflow.cpu.max_memory_allocated) above 1.3x its result's shard; a rank outside the
destination holds at most 0.3x its source shard in flight. Prints one line per route (the bounds
are checked by the test from the figures printed)."""

import numpy as np

import oneflow as flow

S, B, P = flow.sbp.split, flow.sbp.broadcast, flow.sbp.partial_sum
rank, world = flow.env.get_rank(), flow.env.get_world_size()
assert world == 4
ALL = flow.placement("cpu", ranks=[0, 1, 2, 3])
LOW = flow.placement("cpu", ranks=[0, 1])
HIGH = flow.placement("cpu", ranks=[2, 3])
MESH = flow.placement("cpu", ranks=[[0, 1], [2, 3]])
N = 1024  # 4 MiB of float32: 1 MiB shards on 4 ranks


def name_of(pl, sbp):
    sbp = sbp if isinstance(sbp, tuple) else (sbp,)
    where = {ALL: "4", LOW: "[0,1]", HIGH: "[2,3]", MESH: "2x2"}[pl]
    return "(" + ",".join(str(s).replace("oneflow.sbp.", "") for s in sbp) + ")" + where


ROUTES = [
    # one placement, 1-D: the seven kinds of the table, both axes
    (ALL, S(0), ALL, B), (ALL, S(1), ALL, B), (ALL, P, ALL, B),
    (ALL, B, ALL, S(0)), (ALL, B, ALL, S(1)), (ALL, P, ALL, S(0)), (ALL, P, ALL, S(1)),
    (ALL, S(0), ALL, S(1)), (ALL, S(1), ALL, S(0)), (ALL, B, ALL, P), (ALL, S(0), ALL, P),
    (ALL, S(1), ALL, P),
    # a 2 x 2 mesh
    (MESH, (S(0), S(1)), MESH, (S(1), S(0))), (MESH, (S(0), S(0)), MESH, (B, S(0))),
    (MESH, (S(0), S(1)), MESH, (S(0), B)), (MESH, (P, S(1)), MESH, (S(0), S(1))),
    (MESH, (B, B), MESH, (S(1), S(0))),
    # between placements
    (LOW, S(0), HIGH, S(0)), (ALL, S(0), LOW, S(1)), (LOW, B, ALL, S(0)), (ALL, P, LOW, S(0)),
    (ALL, S(1), HIGH, B), (MESH, (S(0), S(1)), ALL, S(1)), (ALL, S(0), MESH, (S(1), S(0))),
]

flow.manual_seed(3)
for src, a, dst, b in ROUTES:
    x = flow.randn(N, N, placement=src, sbp=a)
    want = x.numpy()  # the logical value (a partial sum's is the sum)
    in_bytes = x.to_local().numel() * 4 if rank in np.asarray(src.ranks).flatten() else 0
    flow.comm.barrier()
    flow.cpu.reset_peak_memory_stats()
    base = flow.cpu.memory_allocated()
    y = x.to_global(placement=dst, sbp=b)
    rise = flow.cpu.max_memory_allocated() - base
    in_dst = rank in np.asarray(dst.ranks).flatten()
    out_bytes = y.to_local().numel() * 4 if in_dst else 0
    got = y.numpy()
    route = f"{name_of(src, a)}->{name_of(dst, b)}"
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, err_msg=f"rank {rank}: {route}")
    ratio = rise / out_bytes if out_bytes else float("nan")
    print(f"rank {rank} route {route}: peak {rise} bytes, result shard {out_bytes} bytes, "
          f"source shard {in_bytes} bytes ({ratio:.2f}x)", flush=True)
    del x, y
