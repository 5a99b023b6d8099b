"""Every 1-D conversion among S(0), S(1), B, P on the world's ranks (even and uneven shapes),
placement changes, and on 4 ranks the 2-D conversions of a 2x2 mesh; matmul deduction; dropout
on global tensors. Each result is checked twice: its whole value (t.numpy(), which gathers it)
against the whole tensor, and each rank's local shard against the slice of the whole it must
hold (the balanced split, larger parts first, each mesh dimension splitting what the previous
ones left; under P, the pieces of the ranks that differ only in their P coordinates add up to
that slice) -- a wrong layout that the gather undoes passes the first check, not the second.
Prints "rank R convert ok"."""

import itertools

import numpy as np

import oneflow as flow
from device import DEVICE  # noqa: E402

rank, n = flow.env.get_rank(), flow.env.get_world_size()
B, P = flow.sbp.broadcast, flow.sbp.partial_sum
S = flow.sbp.split
world = flow.placement(DEVICE, ranks=list(range(n)))
flow.manual_seed(3)


def piece(length, parts, k):
    """[begin, end) of part k of `length` split into `parts` (sizes differ by at most one,
    larger first)."""
    base, extra = divmod(length, parts)
    begin = k * base + min(k, extra)
    return begin, begin + base + (k < extra)


def flat_ranks(ranks):
    ranks = ranks.tolist() if hasattr(ranks, "tolist") else ranks  # placement.ranks: ndarray
    return [r for x in ranks for r in flat_ranks(x)] if isinstance(ranks, list) else [ranks]


def region(shape, placement, nd, member):
    """(slices of the whole that `member` holds, its mesh coordinate), or None when the
    placement leaves it out."""
    ranks = flat_ranks(placement.ranks)
    if member not in ranks:
        return None
    coord = np.unravel_index(ranks.index(member), placement.hierarchy)
    bounds = [[0, size] for size in shape]
    for d, s in enumerate(nd):
        if s in (B, P):
            continue
        lo, hi = bounds[s.axis]
        begin, end = piece(hi - lo, placement.hierarchy[d], coord[d])
        bounds[s.axis] = [lo + begin, lo + end]
    return tuple(slice(lo, hi) for lo, hi in bounds), tuple(int(c) for c in coord)


def check_shards(t, ref, what):
    """This rank's local tensor of t against the slice of ref it must hold. A collective when
    t's sbp has P: every rank of the world calls it."""
    nd, placement = t.sbp, t.placement
    local = t.to_local().numpy()
    mine = region(ref.shape, placement, nd, rank)
    if mine is None:
        assert local.size == 0, (what, "a rank outside the placement holds", local.shape)
    else:
        assert local.shape == ref[mine[0]].shape, (what, f"rank {rank} holds {local.shape}, its "
                                                   f"slice of {nd} is {ref[mine[0]].shape}")
    if P not in nd:
        if mine is not None:
            assert np.allclose(local, ref[mine[0]], atol=1e-5), (what, f"rank {rank}", local, ref[mine[0]])
        return
    # Gather every rank's piece, placed where it belongs in the whole.
    placed = np.zeros(ref.shape, np.float32)
    if mine is not None:
        placed[mine[0]] = local
    pieces = [flow.zeros(*ref.shape) for _ in range(n)]
    flow.comm.all_gather(pieces, flow.tensor(placed))
    if mine is None:
        return
    partial_dims = [d for d, s in enumerate(nd) if s == P]
    key = lambda coord: tuple(0 if d in partial_dims else c for d, c in enumerate(coord))  # noqa: E731
    total = np.zeros(ref.shape, np.float32)
    for member in flat_ranks(placement.ranks):
        theirs = region(ref.shape, placement, nd, member)
        if key(theirs[1]) == key(mine[1]):
            total += pieces[member].numpy()
    assert np.allclose(total[mine[0]], ref[mine[0]], atol=1e-5), (
        what, f"the pieces of rank {rank}'s P group do not add up to its slice", total[mine[0]], ref[mine[0]])


def check(t, ref, what):
    got = t.numpy()
    assert got.shape == ref.shape and np.allclose(got, ref, atol=1e-5), (what, got, ref)
    check_shards(t, ref, what)


for shape in [(4, 6), (5, 3)]:
    whole = flow.randn(*shape)
    ref = whole.numpy()
    for a, b in itertools.product([S(0), S(1), B, P], repeat=2):
        t = whole.to_global(placement=world, sbp=B).to_global(sbp=a)
        check_shards(t, ref, f"B -> {a} {shape}")
        u = t.to_global(sbp=b)
        assert u.sbp == (b,)
        check(u, ref, f"{a} -> {b} {shape}")

# placement changes: to one rank and back, to a subset
one = flow.placement(DEVICE, ranks=[0])
x = flow.randn(5, 4)
g = x.to_global(placement=world, sbp=B).to_global(sbp=S(0))
check(g, x.numpy(), "world S(0)")
h = g.to_global(placement=one, sbp=B)
check_shards(h, x.numpy(), "to rank 0")  # rank 0 holds it all, the others nothing
back = h.to_global(placement=world, sbp=S(1))
check(back, x.numpy(), "rank 0 -> world S(1)")

if n == 4:
    mesh = flow.placement(DEVICE, ranks=[[0, 1], [2, 3]])
    whole = flow.randn(6, 5)
    ref = whole.numpy()
    layouts = [(S(0), B), (B, S(1)), (S(0), S(1)), (S(0), S(0)), (P, B), (B, P), (S(1), P)]
    for a, b in itertools.product(layouts, repeat=2):
        t = whole.to_global(placement=mesh, sbp=(B, B)).to_global(sbp=a)
        check_shards(t, ref, f"2-D (B, B) -> {a}")
        check(t.to_global(sbp=b), ref, f"2-D {a} -> {b}")
    # matmul on the mesh: rows over one dimension, columns over the other
    x = flow.randn(4, 3).to_global(placement=mesh, sbp=(B, B))
    w = flow.randn(3, 6).to_global(placement=mesh, sbp=(B, B))
    y = x.to_global(sbp=(S(0), B)) @ w.to_global(sbp=(B, S(1)))
    assert y.sbp == (S(0), S(1)), y.sbp
    check(y, x.numpy() @ w.numpy(), "2-D matmul")

# Global tensors made from local shards, uneven where the balanced split is (sizes differ by
# at most one, larger first); shards that do not follow it are a one-line error on every rank.
whole = np.arange(7 * 5, dtype=np.float32).reshape(7, 5)
for axis in (0, 1):
    lo, hi = piece(whole.shape[axis], n, rank)
    local = whole[lo:hi] if axis == 0 else whole[:, lo:hi]
    g = flow.tensor(local).to_global(placement=world, sbp=S(axis))
    assert tuple(g.shape) == whole.shape, (axis, g.shape)
    check(g, whole, f"uneven local shards S({axis})")
    check(g.to_global(sbp=B), whole, f"uneven local shards S({axis}) -> B")
    check(g.to_global(sbp=S(1 - axis)), whole, f"uneven local shards S({axis}) -> S({1 - axis})")
if n > 1:
    rows = piece(7, n, rank)
    rows = rows[1] - rows[0] + (1 if rank == n - 1 else -1 if rank == 0 else 0)
    try:
        flow.ones(rows, 2).to_global(placement=world, sbp=S(0))
        raise AssertionError("misplaced shards were accepted")
    except RuntimeError as e:
        assert "shards must follow the balanced split" in str(e) and "rank 0 holds a local tensor" in str(e), e
    try:  # OneFlow's bound: only the first 6 axes can be split (sbp.split refuses the rest)
        flow.ones(*([1] * 8 + [2])).to_global(placement=world, sbp=S(8))
        raise AssertionError("split(8) of a local tensor was accepted")
    except RuntimeError as e:
        assert "sbp.split: Expected split axis to be less than the supported maximum axis (6), but got 8!" in str(e), e
if n == 4:
    i, j = rank // 2, rank % 2
    for sbp, (ri, ci) in [((S(0), S(1)), (piece(7, 2, i), piece(5, 2, j))),
                          ((S(1), S(0)), (piece(7, 2, j), piece(5, 2, i))),
                          ((S(0), B), (piece(7, 2, i), (0, 5)))]:
        local = whole[ri[0]:ri[1], ci[0]:ci[1]]
        g = flow.tensor(local).to_global(placement=mesh, sbp=sbp)
        assert tuple(g.shape) == whole.shape, (sbp, g.shape)
        check(g, whole, f"uneven 2-D shards {sbp}")
        check(g.to_global(sbp=(B, B)), whole, f"uneven 2-D shards {sbp} -> (B, B)")
        check(g.to_global(sbp=(S(1), S(0))), whole, f"uneven 2-D shards {sbp} -> (S(1), S(0))")
    outer = piece(7, 2, i)  # (S(0), S(0)): rows split over the first dim, then the second
    inner = piece(outer[1] - outer[0], 2, j)
    local = whole[outer[0] + inner[0]:outer[0] + inner[1]]
    g = flow.tensor(local).to_global(placement=mesh, sbp=(S(0), S(0)))
    check(g, whole, "uneven 2-D shards (S(0), S(0))")
    check(g.to_global(sbp=(B, B)), whole, "uneven 2-D shards (S(0), S(0)) -> (B, B)")

# matmul deduction on 1-D
a = flow.randn(4, 6).to_global(placement=world, sbp=B)
b = flow.randn(6, 2).to_global(placement=world, sbp=B)
ref = a.numpy() @ b.numpy()
for sa, sb, want in [(S(0), B, S(0)), (B, S(1), S(1)), (S(1), S(0), P), (P, B, P), (B, P, P)]:
    y = flow.matmul(a.to_global(sbp=sa), b.to_global(sbp=sb))
    assert y.sbp == (want,), (sa, sb, y.sbp)
    check(y, ref, f"matmul {sa} x {sb}")

# Dropout on global tensors: the mask is drawn whole from the seed (the same on every rank) and
# each rank keeps its slice, so the logical result is the one-process result for the same seed;
# on every shard the kept elements are scaled by 1 / (1 - p) and about 1 - p of them are kept.
p = 0.3
shape = (48, 40)
flow.manual_seed(11)
want = flow.nn.functional.dropout(flow.ones(*shape), p=p, training=True).numpy()
scale = np.float32(1 / (1 - p))
assert set(np.unique(want)) == {0, scale}, np.unique(want)
cases = [(world, (a,)) for a in (S(0), S(1), B, P)]
if n == 4:
    cases += [(mesh, nd) for nd in [(S(0), S(1)), (S(1), S(0)), (S(0), B), (B, S(1)), (P, S(0)), (B, B)]]
for placement, nd in cases:
    x = flow.ones(*shape).to_global(placement=placement, sbp=(B,) * len(nd)).to_global(sbp=nd)
    flow.manual_seed(11)
    y = flow.nn.functional.dropout(x, p=p, training=True)
    what = f"dropout on {nd} over {placement.hierarchy}"
    check(y, want, what)
    if P not in nd:
        local = y.to_local().numpy()
        assert set(np.unique(local)) <= {0, scale}, (what, np.unique(local))
        kept = float((local != 0).mean())
        bound = 5 * np.sqrt(p * (1 - p) / local.size)
        assert abs(kept - (1 - p)) <= bound, (what, f"rank {rank} keeps {kept:.3f} of its shard")
print(f"rank {rank} convert ok", flush=True)
