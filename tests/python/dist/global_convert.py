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

# matmul deduction on 1-D
a = flow.randn(4, 6).to_global(placement=world, sbp=B)
b = flow.randn(6, 2).to_global(placement=world, sbp=B)
ref = a.numpy() @ b.numpy()
for sa, sb, want in [(S(0), B, S(0)), (B, S(1), S(1)), (S(1), S(0), P), (P, B, P), (B, P, P)]:
    y = flow.matmul(a.to_global(sbp=sa), b.to_global(sbp=sb))
    assert y.sbp == (want,), (sa, sb, y.sbp)
    check(y, ref, f"matmul {sa} x {sb}")
print(f"rank {rank} convert ok", flush=True)
