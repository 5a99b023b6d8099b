"""Every 1-D conversion among S(0), S(1), B, P on the world's ranks (even and uneven shapes),
placement changes, and on 4 ranks the 2-D conversions of a 2x2 mesh; values checked against
the whole tensor. Prints "rank R convert ok"."""

import itertools

import numpy as np

import oneflow as flow

rank, n = flow.env.get_rank(), flow.env.get_world_size()
B, P = flow.sbp.broadcast, flow.sbp.partial_sum
S = flow.sbp.split
world = flow.placement("cpu", ranks=list(range(n)))
flow.manual_seed(3)


def check(t, ref, what):
    got = t.numpy()
    assert got.shape == ref.shape and np.allclose(got, ref, atol=1e-5), (what, got, ref)


for shape in [(4, 6), (5, 3)]:
    whole = flow.randn(*shape)
    ref = whole.numpy()
    for a, b in itertools.product([S(0), S(1), B, P], repeat=2):
        t = whole.to_global(placement=world, sbp=B).to_global(sbp=a)
        u = t.to_global(sbp=b)
        assert u.sbp == (b,)
        check(u, ref, f"{a} -> {b} {shape}")
        if b == P:  # the local pieces of a partial sum add up to the whole
            total = u.to_local().clone()
            flow.comm.all_reduce(total)
            check(total, ref, f"partial pieces of {a} -> P")

# placement changes: to one rank and back, to a subset
one = flow.placement("cpu", ranks=[0])
x = flow.randn(5, 4)
g = x.to_global(placement=world, sbp=B).to_global(sbp=S(0))
h = g.to_global(placement=one, sbp=B)
if rank == 0:
    check(h.to_local(), x.numpy(), "to rank 0")
back = h.to_global(placement=world, sbp=S(1))
check(back, x.numpy(), "rank 0 -> world S(1)")

if n == 4:
    mesh = flow.placement("cpu", ranks=[[0, 1], [2, 3]])
    whole = flow.randn(6, 5)
    ref = whole.numpy()
    layouts = [(S(0), B), (B, S(1)), (S(0), S(1)), (S(0), S(0)), (P, B), (B, P), (S(1), P)]
    for a, b in itertools.product(layouts, repeat=2):
        t = whole.to_global(placement=mesh, sbp=(B, B)).to_global(sbp=a)
        check(t.to_global(sbp=b), ref, f"2-D {a} -> {b}")
    # matmul on the mesh: rows over one dimension, columns over the other
    x = flow.randn(4, 3).to_global(placement=mesh, sbp=(B, B))
    w = flow.randn(3, 6).to_global(placement=mesh, sbp=(B, B))
    y = x.to_global(sbp=(S(0), B)) @ w.to_global(sbp=(B, S(1)))
    assert y.sbp == (S(0), S(1)), y.sbp
    check(y, x.numpy() @ w.numpy(), "2-D matmul")

# Global tensors made from local shards, uneven where the balanced split is (sizes differ by
# at most one, larger first); shards that do not follow it are a one-line error on every rank.
def piece(length, parts, k):
    base, extra = divmod(length, parts)
    begin = k * base + min(k, extra)
    return begin, begin + base + (k < extra)


whole = np.arange(7 * 5, dtype=np.float32).reshape(7, 5)
for axis in (0, 1):
    lo, hi = piece(whole.shape[axis], n, rank)
    local = whole[lo:hi] if axis == 0 else whole[:, lo:hi]
    g = flow.tensor(local).to_global(placement=world, sbp=S(axis))
    assert tuple(g.shape) == whole.shape, (axis, g.shape)
    check(g.to_global(sbp=B), whole, f"uneven local shards S({axis})")
if n > 1:
    rows = piece(7, n, rank)
    rows = rows[1] - rows[0] + (1 if rank == n - 1 else -1 if rank == 0 else 0)
    try:
        flow.ones(rows, 2).to_global(placement=world, sbp=S(0))
        raise AssertionError("misplaced shards were accepted")
    except RuntimeError as e:
        assert "shards must follow the balanced split" in str(e) and "rank 0 holds a local tensor" in str(e), e
    try:  # shard shapes are gathered for the first 8 dims only
        flow.ones(*([1] * 8 + [2])).to_global(placement=world, sbp=S(8))
        raise AssertionError("split(8) of a local tensor was accepted")
    except RuntimeError as e:
        assert "to_global: split(8) of a local tensor: only the first 8 dims can be split" in str(e), e
if n == 4:
    i, j = rank // 2, rank % 2
    for sbp, (ri, ci) in [((S(0), S(1)), (piece(7, 2, i), piece(5, 2, j))),
                          ((S(1), S(0)), (piece(7, 2, j), piece(5, 2, i))),
                          ((S(0), B), (piece(7, 2, i), (0, 5)))]:
        local = whole[ri[0]:ri[1], ci[0]:ci[1]]
        g = flow.tensor(local).to_global(placement=mesh, sbp=sbp)
        assert tuple(g.shape) == whole.shape, (sbp, g.shape)
        check(g.to_global(sbp=(B, B)), whole, f"uneven 2-D shards {sbp}")
    outer = piece(7, 2, i)  # (S(0), S(0)): rows split over the first dim, then the second
    inner = piece(outer[1] - outer[0], 2, j)
    local = whole[outer[0] + inner[0]:outer[0] + inner[1]]
    g = flow.tensor(local).to_global(placement=mesh, sbp=(S(0), S(0)))
    check(g.to_global(sbp=(B, B)), whole, "uneven 2-D shards (S(0), S(0))")

# matmul deduction on 1-D
a = flow.randn(4, 6).to_global(placement=world, sbp=B)
b = flow.randn(6, 2).to_global(placement=world, sbp=B)
ref = a.numpy() @ b.numpy()
for sa, sb, want in [(S(0), B, S(0)), (B, S(1), S(1)), (S(1), S(0), P), (P, B, P), (B, P, P)]:
    y = flow.matmul(a.to_global(sbp=sa), b.to_global(sbp=sb))
    assert y.sbp == (want,), (sa, sb, y.sbp)
    check(y, ref, f"matmul {sa} x {sb}")
print(f"rank {rank} convert ok", flush=True)
