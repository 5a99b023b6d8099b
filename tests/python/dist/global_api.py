"""The global API pieces OneFlow's suite found missing or wrong (issue 20), on 4 ranks; each
check prints 'rank R <name> ok'."""

import numpy as np

import oneflow as flow

rank = flow.env.get_rank()
assert flow.env.get_world_size() == 4
B, P, S = flow.sbp.broadcast, flow.sbp.partial_sum, flow.sbp.split


def ok(name):
    print(f"rank {rank} {name} ok", flush=True)


# 0-size shards: a (8, 0, 4) tensor's shards are contiguous, so S -> B / P -> B between
# placements work (all_gather_v refused them: "input must be contiguous"), and flow.Tensor(*shape,
# placement, sbp) has the logical shape (it was the concatenation of per-rank shapes: (16, 0, 4)).
for src, dst in [([0, 1], [1]), ([1, 2, 3], [0, 1, 3]), ([0, 1, 2, 3], [2, 3])]:
    for a in (S(0), S(2), B, P):
        for b in (S(0), S(2), B, P):
            x = flow.Tensor(8, 0, 4, placement=flow.placement("cpu", src), sbp=a)
            assert tuple(x.shape) == (8, 0, 4), (src, a, x.shape)
            y = x.to_global(flow.placement("cpu", dst), b)
            assert tuple(y.shape) == (8, 0, 4) and y.sbp == (b,), (src, dst, a, b, y.shape)
ok("zero size")

# numpy ranks; flow.Tensor(data, placement, sbp) is the logical data
mesh = flow.placement("cpu", ranks=np.arange(4).reshape(2, 2))
assert mesh.hierarchy == (2, 2) and mesh == flow.placement("cpu", ranks=[[0, 1], [2, 3]])
data = np.arange(24, dtype=np.float32).reshape(6, 4)
t = flow.Tensor(data.tolist(), placement=flow.placement("cpu", [0, 1, 2]), sbp=S(0))
assert tuple(t.shape) == (6, 4) and np.array_equal(t.numpy(), data)
ok("constructors")

# random global tensors: (S(0), B) on a 2x2 mesh gives rows 0-3 to ranks 0 and 1, rows 4-7 to
# ranks 2 and 3 (every rank draws the logical value); a generator repeats its draws
flow.manual_seed(233)
x = flow.randn(8, 8, placement=mesh, sbp=[S(0), B])
parts = [None] * 4
mine = x.to_local()
for r in range(4):
    buf = mine.clone() if r == rank else flow.empty(4, 8)
    flow.comm.broadcast(buf, r)
    parts[r] = buf.numpy()
assert np.array_equal(parts[0], parts[1]) and np.array_equal(parts[2], parts[3])
assert not np.array_equal(parts[0], parts[2])
gen = flow.Generator().manual_seed(5)
a = flow.randn(6, 4, placement=mesh, sbp=[S(0), S(1)], generator=gen)
gen.manual_seed(5)
b = flow.randn(6, 4, placement=mesh, sbp=[S(0), S(1)], generator=gen)
assert np.array_equal(a.numpy(), b.numpy())
flow.manual_seed(5)
assert np.array_equal(flow.randn(6, 4).numpy(), a.numpy())  # the same stream as manual_seed
ok("random")

# type_as(global): global on the other's placement, broadcast data from its first rank
g = flow.ones(3, dtype=flow.float64, placement=flow.placement("cpu", [1, 3]), sbp=B)
loc = flow.tensor([rank, rank, rank], dtype=flow.int32)
u = loc.type_as(g)
assert u.is_global and u.placement == g.placement and u.dtype == flow.float64 and u.sbp == (B,)
assert u.numpy().tolist() == [1.0, 1.0, 1.0], u.numpy()
# OneFlow: with a global other, other's placement and sbp; with a local other, the whole value
# on other's device
s0 = flow.ones(4, 2, dtype=flow.float64, placement=flow.placement("cpu", [0, 1, 2, 3]), sbp=S(0))
v = flow.tensor(np.arange(8).reshape(4, 2), dtype=flow.int32).type_as(s0)
assert v.sbp == (S(0),) and v.placement == s0.placement and v.dtype == flow.float64
assert v.numpy().tolist() == np.arange(8.0).reshape(4, 2).tolist()
assert v.to_local().numpy().tolist() == [[2.0 * rank, 2.0 * rank + 1]]
w = s0.type_as(flow.tensor([1]))
assert w.is_local and w.dtype == flow.int64 and w.numpy().tolist() == [[1, 1]] * 4
ok("type_as")

# a numpy array operand of a global tensor: on its placement, broadcast (the first rank's)
g = flow.tensor(np.arange(8.0).reshape(4, 2), placement=flow.placement("cpu", [0, 1, 2, 3]),
                sbp=S(0))
a = np.full((4, 2), 10.0 + rank)
for r in (g + a, a - g, g * a, a > g):
    assert r.is_global and r.placement == g.placement and r.sbp == (S(0),), (r.placement, r.sbp)
assert (a - g).numpy().tolist() == (10.0 - np.arange(8.0).reshape(4, 2)).tolist()
ok("numpy operands")

# nn.functional.sparse_softmax_cross_entropy (OneFlow's) on split logits: the values and the
# gradient of every layout, against the whole computation in numpy
rng = np.random.default_rng(3)  # the same data on every rank
logits, labels = rng.standard_normal((8, 6)), rng.integers(0, 6, (8,))
shifted = logits - logits.max(axis=1, keepdims=True)
log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
want = -log_probs[np.arange(8), labels]
want_grad = np.exp(log_probs)
want_grad[np.arange(8), labels] -= 1
four = flow.placement("cpu", [0, 1, 2, 3])
for logits_sbp in (S(0), S(1), B):
    for labels_sbp in (S(0), B):
        x = flow.tensor(logits, placement=four, sbp=logits_sbp, requires_grad=True)
        y = flow.tensor(labels, placement=four, sbp=labels_sbp)
        loss = flow.nn.functional.sparse_softmax_cross_entropy(labels=y, logits=x)
        assert loss.placement == four and tuple(loss.shape) == (8,)
        assert np.allclose(loss.numpy(), want, atol=1e-6), (logits_sbp, labels_sbp)
        loss.sum().backward()
        assert x.grad.sbp == (logits_sbp,) and np.allclose(x.grad.numpy(), want_grad, atol=1e-6)
ok("sparse softmax cross entropy")

# devices: a local tensor is on cpu:<local rank> as OneFlow says, and every cpu:N is this
# process's CPU; a global tensor has no device
lin = flow.nn.Linear(3, 4)
assert lin.weight.device == flow.device("cpu", rank) == flow.device("cpu")
assert repr(lin.weight.device) == f"device(type='cpu', index={rank})"
assert flow.tensor([1.0], device=f"cpu:{(rank + 1) % 4}").device == flow.device("cpu")
lin.to_global(placement=flow.placement("cpu", [0, 1, 2, 3]), sbp=B)
try:
    lin.weight.device
    raise AssertionError("device of a global tensor did not raise")
except RuntimeError as e:
    assert str(e).startswith("device: a global tensor has no device but a placement"), e
ok("devices")

# global_view: nested structures, an sbp per tensor, back to local
from oneflow.utils import global_view  # noqa: E402

P4 = flow.placement("cpu", [0, 1, 2, 3])
state = {"w": flow.full((4, 2), float(rank)), "rest": [flow.ones(8), (flow.zeros(4, 4), 7)]}
pick = {id(state["w"]): P}


def sbp_of(tree, tensor):
    return pick.get(id(tensor), S(0))


gs = global_view.to_global(state, placement=P4, sbp=sbp_of)
assert gs["w"].sbp == (P,) and gs["rest"][0].sbp == (S(0),) and gs["rest"][1][1] == 7
assert gs["w"].numpy().tolist() == [[6.0, 6.0]] * 4  # partial sums of 0 + 1 + 2 + 3
assert tuple(gs["rest"][0].shape) == (32,)  # split pieces of 8 from each of 4 ranks
back = global_view.to_local(gs)
assert not back["w"].is_global and back["rest"][1][0].is_local
with global_view.global_mode(True, placement=P4, sbp=S(0)):
    z = flow.zeros(8, 2)
    assert z.is_global and z.sbp == (S(0),) and z.device == flow.device("cpu")
    assert global_view.current_global_mode().placement == P4
    with global_view.global_mode(False):
        assert flow.zeros(2).is_local
assert flow.zeros(2).is_local and not global_view.current_global_mode().is_enabled
ok("global view")
