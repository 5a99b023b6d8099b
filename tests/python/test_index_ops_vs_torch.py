"""The everyday index / shape / sort / matmul API compared with PyTorch on the same inputs:
values (rtol 1e-4 for float32), indices, and gradients of every differentiable output, plus the
error line of each misuse. Covers flow.X functions and the Tensor methods PyTorch has."""

import numpy as np
import pytest

import oneflow as flow
import oneflow.nn.functional as F

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-4, 1e-5


def pair(shape, lo=-2.0, hi=2.0, seed=0, ints=False):
    """The same random array as a oneflow and a torch leaf (float32, requiring grad)."""
    rng = np.random.default_rng(seed)
    if ints:
        a = rng.integers(int(lo), int(hi), size=shape).astype(np.float32)
    else:
        a = rng.uniform(lo, hi, size=shape).astype(np.float32)
    return (flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True))


def same(f_out, t_out, exact=False):
    fv = f_out.detach().numpy() if isinstance(f_out, flow.Tensor) else np.asarray(f_out)
    tv = t_out.detach().numpy() if isinstance(t_out, torch.Tensor) else np.asarray(t_out)
    assert tuple(fv.shape) == tuple(tv.shape), (fv.shape, tv.shape)
    if exact:
        np.testing.assert_array_equal(fv, tv)
    else:
        np.testing.assert_allclose(fv, tv, rtol=RTOL, atol=ATOL)


def check(fn_flow, fn_torch, *arrays, grad=True):
    """Runs both functions on the pairs, compares the (first) output, then the gradients of
    sum(out * w) for a fixed random w."""
    fx = [a for a, _ in arrays]
    tx = [b for _, b in arrays]
    fo, to = fn_flow(*fx), fn_torch(*tx)
    if isinstance(fo, tuple):
        fo, to = fo[0], to[0]
    same(fo, to)
    if not grad:
        return
    w = np.random.default_rng(99).uniform(-1, 1, size=tuple(to.shape)).astype(np.float32)
    (fo * flow.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    for f, t in zip(fx, tx):
        if t.requires_grad:
            assert f.grad is not None
            same(f.grad, t.grad)


# ---------------------------------------------------------------- creation

def test_linspace_meshgrid_new_and_diag():
    for start, end, steps in [(0, 1, 5), (-3.5, 7.25, 12), (2, -2, 7), (4, 9, 1), (0, 1, 0)]:
        same(flow.linspace(start, end, steps), torch.linspace(start, end, steps))
    assert flow.linspace(0, 1, 3, dtype=flow.float64).dtype == flow.float64
    a, b = pair((3,)), pair((4,), seed=1)
    for indexing in ("ij", "xy"):
        fo = flow.meshgrid(a[0], b[0], indexing=indexing)
        to = torch.meshgrid(a[1], b[1], indexing=indexing)
        for f, t in zip(fo, to):
            same(f, t)
    fo = flow.meshgrid([a[0], b[0]])  # a list; 'ij' by default
    same(fo[1], torch.meshgrid(a[1], b[1], indexing="ij")[1])
    x = flow.ones(2, 3, dtype=flow.int32)
    for name, args in [("new_zeros", ((4, 2),)), ("new_ones", (3, 1)), ("new_full", ((2, 2), 7)),
                       ("new_empty", (5,))]:
        f = getattr(x, name)(*args)
        t = getattr(torch.ones(2, 3, dtype=torch.int32), name)(*args)
        assert tuple(f.shape) == tuple(t.shape) and str(f.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        if name != "new_empty":
            same(f, t, exact=True)
    assert x.new_zeros(2, dtype=flow.float64).dtype == flow.float64
    for args, kw in (((2, 3), {}), (((4,),), {"dtype": "int32"}), (([0, 5],), {"dtype": "float64"}), (((),), {})):
        f = flow.empty(*args, **{k: getattr(flow, v) for k, v in kw.items()})
        t = torch.empty(*args, **{k: getattr(torch, v) for k, v in kw.items()})
        assert tuple(f.shape) == tuple(t.shape) and str(f.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    for k in (-2, 0, 1):
        check(lambda v: flow.diag(v, k), lambda v: torch.diag(v, k), pair((4,)))
        check(lambda m: m.diag(k), lambda m: m.diag(k), pair((3, 5)))
    check(lambda m: flow.diagonal(m, 1, 0, 2), lambda m: torch.diagonal(m, 1, 0, 2), pair((3, 2, 4)))


# ---------------------------------------------------------------- shape ops

def test_split_chunk_unflatten_narrow():
    fx, tx = pair((7, 4))
    for arg in (3, [2, 5], (1, 1, 5)):
        fo, to = flow.split(fx, arg), torch.split(tx, arg)
        assert len(fo) == len(to)
        for f, t in zip(fo, to):
            same(f, t)
    for chunks, dim in ((3, 0), (4, 1), (10, 0)):
        fo, to = fx.chunk(chunks, dim), tx.chunk(chunks, dim)
        assert len(fo) == len(to)
        for f, t in zip(fo, to):
            same(f, t)
    check(lambda x: flow.cat([p * (i + 1) for i, p in enumerate(x.split(2, 1))], 1),
          lambda x: torch.cat([p * (i + 1) for i, p in enumerate(x.split(2, 1))], 1), pair((3, 4)))
    check(lambda x: flow.unflatten(x, 1, (2, -1)), lambda x: torch.unflatten(x, 1, (2, -1)), pair((3, 6)))
    check(lambda x: x.unflatten(0, [3, 1]), lambda x: x.unflatten(0, [3, 1]), pair((3, 6)))
    check(lambda x: flow.narrow(x, 1, 1, 2), lambda x: torch.narrow(x, 1, 1, 2), pair((3, 4)))
    check(lambda x: x.narrow(0, -2, 2), lambda x: x.narrow(0, -2, 2), pair((3, 4)))


def test_flip_roll_repeat_repeat_interleave():
    check(lambda x: flow.flip(x, [0, 2]), lambda x: torch.flip(x, [0, 2]), pair((2, 3, 4)))
    check(lambda x: x.flip(-1), lambda x: x.flip(-1), pair((2, 3, 4)))
    check(lambda x: x.flip(0, 1), lambda x: x.flip(0, 1), pair((2, 3, 4)))
    for shifts, dims in ((1, 0), ((2, -1), (0, 1)), (5, None), (-3, 1)):
        check(lambda x: flow.roll(x, shifts, dims), lambda x: torch.roll(x, shifts, dims), pair((3, 4)))
    check(lambda x: x.roll(1), lambda x: x.roll(1), pair((3, 4)))
    for reps in ((2, 1), (1, 3, 2), (2, 2)):
        check(lambda x: x.repeat(*reps), lambda x: x.repeat(*reps), pair((3, 2)))
    check(lambda x: x.repeat((2, 1)), lambda x: x.repeat((2, 1)), pair((3, 2)))
    for reps, dim in ((2, 0), (3, 1), (2, None), (2, -1)):
        check(lambda x: flow.repeat_interleave(x, reps, dim), lambda x: torch.repeat_interleave(x, reps, dim),
              pair((3, 2)))
    check(lambda x: x.repeat_interleave(flow.tensor([1, 0, 2]), dim=0),
          lambda x: x.repeat_interleave(torch.tensor([1, 0, 2]), dim=0), pair((3, 2)))
    for r in ([2, 0, 3], [1]):  # repeats alone: the indices, each repeated
        same(flow.repeat_interleave(flow.tensor(r)), torch.repeat_interleave(torch.tensor(r)), exact=True)


def test_tril_triu():
    for k in (-1, 0, 2):
        check(lambda x: flow.tril(x, k), lambda x: torch.tril(x, k), pair((2, 4, 5)))
        check(lambda x: x.triu(k), lambda x: x.triu(k), pair((4, 3)))
    x = flow.ones(3, 3)
    x.tril_()
    same(x, torch.ones(3, 3).tril_())
    same(flow.triu(flow.ones(3, 4, dtype=flow.int64), 1), torch.triu(torch.ones(3, 4, dtype=torch.int64), 1),
         exact=True)


def test_take_along_dim_and_one_hot():
    idx = np.random.default_rng(3).integers(0, 5, size=(3, 2))
    check(lambda x: flow.take_along_dim(x, flow.tensor(idx), 1),
          lambda x: torch.take_along_dim(x, torch.tensor(idx), 1), pair((3, 5)))
    check(lambda x: x.take_along_dim(flow.tensor(idx[:1]), dim=1),
          lambda x: x.take_along_dim(torch.tensor(idx[:1]), dim=1), pair((3, 5)))  # broadcast
    check(lambda x: flow.take_along_dim(x, flow.tensor([14, 0, 3])),
          lambda x: torch.take_along_dim(x, torch.tensor([14, 0, 3])), pair((3, 5)))
    fx, tx = pair((3, 5))
    same(flow.take_along_dim(fx, fx.argsort(dim=1), dim=1), torch.take_along_dim(tx, tx.argsort(dim=1), dim=1))
    c = np.array([[2, 0], [1, 4]])
    same(F.one_hot(flow.tensor(c)), torch.nn.functional.one_hot(torch.tensor(c)), exact=True)
    same(F.one_hot(flow.tensor(c), num_classes=7), torch.nn.functional.one_hot(torch.tensor(c), 7), exact=True)
    assert F.one_hot(flow.tensor(c)).dtype == flow.int64


def test_scatter_and_scatter_add():
    rng = np.random.default_rng(5)
    # Distinct places per row: scatter's winner among duplicates is unspecified.
    index = np.stack([rng.permutation(5)[:3] for _ in range(4)])
    check(lambda x, s: flow.scatter(x, 1, flow.tensor(index), s),
          lambda x, s: torch.scatter(x, 1, torch.tensor(index), s), pair((4, 5)), pair((4, 3), seed=1))
    check(lambda x, s: x.scatter(1, flow.tensor(index[:2, :2]), s),  # index smaller than src and x
          # torch 1.13's backward rejects a src larger than the index: give it the used part
          lambda x, s: x.scatter(1, torch.tensor(index[:2, :2]), s[:2, :2]), pair((4, 5)), pair((4, 3), seed=1))
    check(lambda x: flow.scatter(x, 1, flow.tensor(index), 2.5),
          lambda x: torch.scatter(x, 1, torch.tensor(index), 2.5), pair((4, 5)))
    check(lambda x: x.scatter(1, flow.tensor(index), value=-1.0),
          lambda x: x.scatter(1, torch.tensor(index), value=-1.0), pair((4, 5)))
    dup = rng.integers(0, 4, size=(6, 5))
    check(lambda x, s: flow.scatter_add(x, 0, flow.tensor(dup), s),
          lambda x, s: torch.scatter_add(x, 0, torch.tensor(dup), s), pair((4, 5)), pair((6, 5), seed=2))
    check(lambda x, s: x.scatter_add(1, flow.tensor(dup[:3, :2]), s),
          lambda x, s: x.scatter_add(1, torch.tensor(dup[:3, :2]), s[:3, :2]), pair((4, 5)), pair((6, 5), seed=2))
    check(lambda x, s: x.scatter(1, flow.tensor(dup[:3, :2]), s, reduce="add"),
          lambda x, s: x.scatter_add(1, torch.tensor(dup[:3, :2]), s[:3, :2]), pair((4, 5)),
          pair((6, 5), seed=2))
    # In place, on tensors that do not require grad.
    f = flow.zeros(3, 4)
    t = torch.zeros(3, 4)
    f.scatter_(1, flow.tensor([[1], [3], [0]]), flow.ones(3, 1))
    t.scatter_(1, torch.tensor([[1], [3], [0]]), torch.ones(3, 1))
    same(f, t, exact=True)
    f.scatter_add_(0, flow.tensor([[2, 2, 2, 2]]), flow.full((1, 4), 5.0))
    t.scatter_add_(0, torch.tensor([[2, 2, 2, 2]]), torch.full((1, 4), 5.0))
    same(f, t, exact=True)
    fi = flow.zeros(2, 3, dtype=flow.int64).scatter_(1, flow.tensor([[2], [0]]), 7)
    same(fi, torch.zeros(2, 3, dtype=torch.int64).scatter_(1, torch.tensor([[2], [0]]), 7), exact=True)


# ---------------------------------------------------------------- scans and sorting

def test_cumsum_cumprod():
    for dim in (0, 1, -1):
        check(lambda x: flow.cumsum(x, dim), lambda x: torch.cumsum(x, dim), pair((3, 4)))
        check(lambda x: x.cumprod(dim), lambda x: x.cumprod(dim), pair((3, 4), 0.5, 1.5))
    # Zeros in the input: PyTorch's gradient is exact there too.
    z = np.array([[2.0, 0.0, 3.0, 0.5], [0.0, 1.5, 0.0, 2.0], [1.1, 0.8, 1.2, 0.0]], np.float32)
    check(lambda x: flow.cumprod(x, 1), lambda x: torch.cumprod(x, 1),
          (flow.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)))
    i = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    for name in ("cumsum", "cumprod"):
        f, t = getattr(flow, name)(flow.tensor(i), 1), getattr(torch, name)(torch.tensor(i), 1)
        same(f, t, exact=True)
        assert f.dtype == flow.int64 and t.dtype == torch.int64
    same(flow.tensor([True, False, True]).cumsum(0), torch.tensor([True, False, True]).cumsum(0), exact=True)
    same(flow.cumsum(flow.tensor(i), 0, dtype=flow.float64), torch.cumsum(torch.tensor(i), 0, dtype=torch.float64))


def test_sort_argsort_topk():
    for dim, desc in ((1, False), (0, True), (-1, True)):
        fo = flow.sort(pair((4, 6))[0], dim, descending=desc)
        fx, tx = pair((4, 6))
        fo, to = fx.sort(dim, desc), tx.sort(dim, desc)
        same(fo.values, to.values)
        same(fo.indices, to.indices, exact=True)
        check(lambda x: flow.sort(x, dim, desc)[0], lambda x: torch.sort(x, dim, desc)[0], pair((4, 6)))
        same(flow.argsort(fx, dim, desc), torch.argsort(tx, dim, desc), exact=True)
    # Ties: stable, as torch's stable=True.
    ties = np.random.default_rng(7).integers(0, 3, size=(5, 8)).astype(np.float32)
    for desc in (False, True):
        fo = flow.sort(flow.tensor(ties), 1, descending=desc)
        to = torch.sort(torch.tensor(ties), dim=1, descending=desc, stable=True)
        same(fo.indices, to.indices, exact=True)
    nan = [3.0, float("nan"), -1.0, 2.0]
    same(flow.sort(flow.tensor(nan)).indices, torch.sort(torch.tensor(nan)).indices, exact=True)
    same(flow.tensor([5, 1, 4]).sort(descending=True).values, torch.tensor([5, 1, 4]).sort(descending=True).values,
         exact=True)
    for k, dim, largest in ((2, 1, True), (3, 0, False), (1, -1, True)):
        fx, tx = pair((4, 6), seed=k)
        fo, to = flow.topk(fx, k, dim, largest), torch.topk(tx, k, dim, largest)
        same(fo.values, to.values)
        same(fo.indices, to.indices, exact=True)
        check(lambda x: x.topk(k, dim=dim, largest=largest)[0],
              lambda x: x.topk(k, dim=dim, largest=largest)[0], pair((4, 6), seed=k))
    # sorted=False: the order is unspecified; compare as sets, with each value at its index
    for k, dim, largest in ((3, 1, True), (2, 0, False)):
        fx, tx = pair((4, 6), seed=10 + k)
        fo, to = flow.topk(fx, k, dim, largest, sorted=False), torch.topk(tx, k, dim, largest, sorted=False)
        same(fo.values.sort(dim).values, to.values.sort(dim).values)
        same(fo.indices.sort(dim).values, to.indices.sort(dim).values, exact=True)
        same(flow.take_along_dim(fx, fo.indices, dim), fo.values, exact=True)
        fo.values.sum().backward(), to.values.sum().backward()
        same(fx.grad, tx.grad, exact=True)


def test_all_any_median_mode():
    m = np.array([[1, 0, 2], [3, 4, 5]], np.float32)
    fm, tm = flow.tensor(m), torch.tensor(m)
    for f, t in ((flow.all(fm), torch.all(tm)), (fm.any(), tm.any()), (flow.all(fm, 1), torch.all(tm, 1)),
                 (fm.any(0, keepdim=True), tm.any(0, keepdim=True)), (flow.any(fm == 0, dim=1), torch.any(tm == 0, dim=1))):
        same(f, t, exact=True)
        assert f.dtype == flow.bool
    same(flow.all(flow.ones(0)), torch.all(torch.ones(0)), exact=True)
    for dim, keepdim in ((1, False), (0, True), (-1, False)):
        fx, tx = pair((5, 6), seed=dim + 3)
        fo, to = flow.median(fx, dim, keepdim), torch.median(tx, dim, keepdim)
        same(fo.values, to.values)
        same(fo.indices, to.indices, exact=True)
        check(lambda x: x.median(dim, keepdim)[0], lambda x: x.median(dim, keepdim)[0], pair((5, 6), seed=dim + 3))
    check(lambda x: flow.median(x), lambda x: torch.median(x), pair((4, 5)))
    nan_row = [[3.0, 1.0, float("nan"), 1.0, 5.0], [2.0, 2.0, 0.0, 0.0, 7.0]]
    fo, to = flow.median(flow.tensor(nan_row), 1), torch.median(torch.tensor(nan_row), 1)
    np.testing.assert_array_equal(np.isnan(fo.values.numpy()), np.isnan(to.values.numpy()))
    same(fo.indices, to.indices, exact=True)
    modes = np.random.default_rng(8).integers(0, 4, size=(6, 9)).astype(np.float32)
    for dim in (1, 0):
        fo = flow.mode(flow.tensor(modes), dim)
        to = torch.mode(torch.tensor(modes), dim)
        same(fo.values, to.values, exact=True)
        same(fo.indices, to.indices, exact=True)
    fx = flow.tensor(modes, requires_grad=True)
    tx = torch.tensor(modes, requires_grad=True)
    fx.mode(1)[0].sum().backward()
    tx.mode(1)[0].sum().backward()
    same(fx.grad, tx.grad, exact=True)


def test_unique_and_multinomial():
    x = np.array([[3, 1, 2], [3, 1, 1]])
    for kw in ({}, {"return_inverse": True}, {"return_counts": True},
               {"return_inverse": True, "return_counts": True}):
        fo = flow.unique(flow.tensor(x), **kw)
        to = torch.unique(torch.tensor(x), **kw)
        if not isinstance(fo, tuple):
            fo, to = (fo,), (to,)
        assert len(fo) == len(to)
        for f, t in zip(fo, to):
            same(f, t, exact=True)
    # sorted=False leaves the order unspecified (torch's differs): compare as a mapping.
    vals, inv = flow.tensor(x).unique(sorted=False, return_inverse=True)
    np.testing.assert_array_equal(vals.numpy()[inv.numpy()], x)
    assert sorted(vals.tolist()) == sorted(set(x.ravel().tolist()))
    p = flow.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 1.0, 1.0]])
    flow.manual_seed(4)
    a = flow.multinomial(p, 3)
    flow.manual_seed(4)
    b = p.multinomial(3)
    assert a.tolist() == b.tolist() and a.dtype == flow.int64 and tuple(a.shape) == (2, 3)
    assert all(len(set(row)) == 3 for row in a.tolist()) and 1 not in a.tolist()[0]
    draws = flow.multinomial(flow.tensor([0.2, 0.0, 0.8]), 4000, replacement=True).numpy()
    assert (draws != 1).all() and abs((draws == 2).mean() - 0.8) < 0.03


# ---------------------------------------------------------------- matmul family

def test_bmm_addmm_baddbmm_outer():
    check(lambda a, b: flow.bmm(a, b), lambda a, b: torch.bmm(a, b), pair((2, 3, 4)), pair((2, 4, 5), seed=1))
    check(lambda a, b: a.bmm(b), lambda a, b: a.bmm(b), pair((2, 3, 4)), pair((2, 4, 5), seed=1))
    check(lambda c, a, b: flow.addmm(c, a, b, beta=0.5, alpha=-2),
          lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=-2), pair((3, 5)), pair((3, 4), seed=1),
          pair((4, 5), seed=2))
    check(lambda c, a, b: c.addmm(a, b), lambda c, a, b: c.addmm(a, b), pair((5,)), pair((3, 4), seed=1),
          pair((4, 5), seed=2))
    check(lambda c, a, b: flow.baddbmm(c, a, b, beta=2, alpha=0.5),
          lambda c, a, b: torch.baddbmm(c, a, b, beta=2, alpha=0.5), pair((2, 3, 5)), pair((2, 3, 4), seed=1),
          pair((2, 4, 5), seed=2))
    nan = flow.full((3, 5), float("nan"))
    a, b = pair((3, 4), seed=1), pair((4, 5), seed=2)
    same(flow.addmm(nan, a[0], b[0], beta=0), torch.addmm(torch.full((3, 5), float("nan")), a[1], b[1], beta=0))
    check(lambda a, b: flow.outer(a, b), lambda a, b: torch.outer(a, b), pair((3,)), pair((4,), seed=1))
    check(lambda a, b: a.ger(b), lambda a, b: a.ger(b), pair((3,)), pair((4,), seed=1))


@pytest.mark.parametrize("eq,shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("b...d,bd->b...", [(2, 3, 5, 4), (2, 4)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bii->bi", [(2, 3, 3)]),
    ("i,i", [(5,), (5,)]),
    ("ijk->kij", [(2, 3, 4)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
])
def test_einsum(eq, shapes):
    pairs = [pair(s, seed=i) for i, s in enumerate(shapes)]
    check(lambda *x: flow.einsum(eq, *x), lambda *x: torch.einsum(eq, *x), *pairs)
    same(flow.einsum(eq, [p[0] for p in pairs]), torch.einsum(eq, [p[1] for p in pairs]))


# ---------------------------------------------------------------- misuse: one clear line each

def test_error_lines():
    x = flow.ones(3, 4)
    cases = [
        (lambda: flow.einsum("ij,jk->ik", x), RuntimeError, "einsum: 2 input terms for 1 operands in equation 'ij,jk->ik'"),
        (lambda: flow.einsum("ijk->i", x), RuntimeError,
         r"einsum: term 'ijk' names 3 dims but operand 0 has 2 \(shape \(3, 4\)\) in equation 'ijk->i'"),
        (lambda: flow.einsum("ij->ii", x), RuntimeError, "einsum: output label 'i' appears more than once in equation 'ij->ii'"),
        (lambda: flow.einsum("i.j->i", x), RuntimeError, r"einsum: a '\.' that is not part of '\.\.\.' in equation 'i\.j->i'"),
        (lambda: flow.einsum("ij->i->j", x), RuntimeError, "einsum: more than one '->' in equation 'ij->i->j'"),
        (lambda: flow.topk(x, 5), RuntimeError, r"topk: k must be in \[0, 4\] for dim 1 of size 4, got 5"),
        (lambda: flow.sort(x, 2), IndexError, "sort: dim 2 out of range"),
        (lambda: flow.tril(flow.ones(3)), RuntimeError, r"tril: expected a tensor with at least 2 dims, got 1 \(shape \(3,\)\)"),
        (lambda: flow.flip(x, [0, 0]), RuntimeError, "flip: dim 0 appears more than once in dims"),
        (lambda: flow.split(x, [1, 1], 0), RuntimeError, r"split: sizes \(1, 1\) sum to 2 but dim 0 has size 3"),
        (lambda: flow.chunk(x, 0), RuntimeError, "chunk: chunks must be positive, got 0"),
        (lambda: flow.narrow(x, 1, 3, 2), RuntimeError, "narrow: start 3 \\+ length 2 exceeds dim 1 of size 4"),
        (lambda: flow.unflatten(x, 1, (3, -1)), RuntimeError, r"unflatten: sizes \(3, -1\) do not multiply to dim 1's size 4"),
        (lambda: x.repeat(2), RuntimeError, "repeat: got 1 repeats for a tensor of 2 dims; give at least one per dim"),
        (lambda: flow.scatter(x, 1, flow.tensor([[4]]), 1.0), IndexError,
         "scatter: index 4 is out of bounds for dimension 1 with size 4"),
        (lambda: flow.scatter(x, 1, flow.tensor([[0.0]]), 1.0), RuntimeError,
         "scatter: index must be an int64 or int32 tensor, got float32"),
        (lambda: flow.scatter_add(x, 0, flow.zeros(1, 5, dtype=flow.int64), flow.ones(1, 5)), RuntimeError,
         r"scatter_add: index shape \(1, 5\) must not exceed input shape \(3, 4\) except in dim 0"),
        (lambda: flow.scatter(x, 1, flow.tensor([[0]]), reduce="multiply", src=1.0), NotImplementedError,
         r"scatter: reduce='multiply' is not supported \(only 'add'\)"),
        (lambda: flow.scatter(x, 1, flow.tensor([[0]])), TypeError,
         r"scatter: pass exactly one of src \(a tensor or number\) and value"),
        (lambda: F.one_hot(flow.tensor([0, 3]), 3), RuntimeError,
         r"one_hot: class values must be in \[0, 3\), got values in \[0, 3\]"),
        (lambda: F.one_hot(flow.tensor([0.0])), RuntimeError, "one_hot: expected an int64 \\(or int32\\) index tensor, got float32"),
        (lambda: flow.unique(x, dim=0), NotImplementedError, "unique: dim= is not supported"),
        (lambda: flow.multinomial(flow.tensor([0.5, 0.5]), 3), RuntimeError,
         "multinomial: cannot draw 3 samples without replacement from 2 categories"),
        (lambda: flow.multinomial(flow.tensor([0.5, -0.5]), 1), RuntimeError,
         "multinomial: probabilities must be finite and non-negative, got -0.5"),
        (lambda: flow.multinomial(flow.tensor([[[1.0]]]), 1), RuntimeError,
         r"multinomial: expected a 1-D or 2-D tensor of probabilities, got shape \(1, 1, 1\)"),
        (lambda: flow.bmm(x, x), RuntimeError, r"bmm: expected 3-D tensors, got shapes \(3, 4\) and \(3, 4\)"),
        (lambda: flow.addmm(flow.ones(2), x, flow.ones(4, 5)), RuntimeError,
         r"addmm: input of shape \(2,\) does not broadcast to the product's shape \(3, 5\)"),
        (lambda: flow.outer(x, flow.ones(2)), RuntimeError, r"outer: expected 1-D tensors, got shapes \(3, 4\) and \(2,\)"),
        (lambda: flow.meshgrid(x, indexing="ji"), RuntimeError, "meshgrid: indexing must be 'ij' or 'xy', got 'ji'"),
        (lambda: flow.diag(flow.ones(2, 2, 2)), RuntimeError, r"diag: expected a 1-D or 2-D tensor, got shape \(2, 2, 2\)"),
        (lambda: flow.take_along_dim(x, flow.tensor([0])[None].expand(2, 1), 1), RuntimeError,
         r"take_along_dim: input shape \(3, 4\) and indices shape \(2, 1\) do not broadcast outside dim 1"),
        (lambda: flow.repeat_interleave(flow.tensor([[1, 2]])), TypeError,
         r"repeat_interleave: with one argument it must be a 1-D integer tensor of repeats, got oneflow.int64 "
         r"of shape \(1, 2\)"),
        (lambda: flow.repeat_interleave(x, flow.tensor([1, 2]), dim=0), RuntimeError,
         r"repeat_interleave: repeats of shape \(2,\) must have one element or one per element of dim 0 \(size 3\)"),
    ]
    for fn, exc, pattern in cases:
        with pytest.raises(exc, match=pattern):
            fn()


def test_unique_of_a_global_tensor_is_one_clear_line():
    g = flow.ones(4).to_global(placement=flow.placement("cpu", ranks=[0]), sbp=flow.sbp.broadcast)
    with pytest.raises(RuntimeError, match=r"unique: not supported on a global tensor; use to_local\(\)"):
        flow.unique(g)
