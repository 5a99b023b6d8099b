"""OneFlow-only ops on global tensors, 2 ranks: scatter_nd / gather_nd, nn.CoinFlip,
distributed_partial_fc_sample over a row-split and a broadcast weight. Prints '<case> ok'."""

import numpy as np

import oneflow as flow
from device import DEVICE  # noqa: E402

rank = flow.env.get_rank()
P = flow.placement.all(DEVICE)
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
mesh = flow.placement(DEVICE, ranks=[[0, 1]])


def ok(name):
    print(f"rank {rank} {name} ok", flush=True)


# scatter_nd / gather_nd: against a numpy loop; repeated coordinates add up; gradients.
idx = np.array([[0, 1], [2, 3], [0, 1], [1, 0]])
upd = np.arange(4 * 5, dtype=np.float32).reshape(4, 5)
want = np.zeros((3, 4, 5), np.float32)
for r, (a, b) in enumerate(idx):
    want[a, b] += upd[r]
for place, sbp in [(P, [B]), (mesh, [B, B])]:
    i = flow.tensor(idx, placement=place, sbp=sbp)
    u = flow.tensor(upd, placement=place, sbp=sbp, requires_grad=True)
    out = flow.scatter_nd(i, u, [3, 4, 5])
    assert np.array_equal(out.numpy(), want)
    (out * out).sum().backward()
    assert np.allclose(u.grad.numpy(), 2 * want[idx[:, 0], idx[:, 1]])
    assert np.array_equal(flow.gather_nd(out, i).numpy(), want[idx[:, 0], idx[:, 1]])
ok("scatter_nd")

# CoinFlip: int8 draws of the batch, the layout asked for; a seed repeats; p = 0 and 1 exact.
for sbp in ([B], [S0]):
    x = flow.nn.CoinFlip(64, 7, 0.5, placement=P, sbp=sbp)()
    assert x.dtype == flow.int8 and tuple(x.shape) == (64,) and x.sbp == tuple(sbp)
    assert np.array_equal(x.numpy(), flow.nn.CoinFlip(64, 7, 0.5, placement=P, sbp=sbp)().numpy())
    assert 10 < int(x.numpy().sum()) < 54
    assert flow.nn.CoinFlip(16, 1, 1.0, placement=P, sbp=sbp)().numpy().tolist() == [1] * 16
    assert flow.nn.CoinFlip(16, 1, 0.0, placement=P, sbp=sbp)().numpy().tolist() == [0] * 16
y = flow.nn.CoinFlip(8, None, 0.5, placement=mesh, sbp=[S0, S0])()
assert y.sbp == (S0, S0), y.sbp
ok("coin_flip")

# partial FC: every label maps back, the sampled rows are the weight's, each shard samples its
# own classes with the batch's first; gradient reaches exactly the sampled rows.
flow.manual_seed(3)
for sbp in ([S0], [B]):
    w = flow.randn(40, 3, placement=P, sbp=sbp, requires_grad=True)
    label = flow.randint(0, 40, (6,), placement=P, sbp=[S0])
    m, s, sw = flow.distributed_partial_fc_sample(w, label, 10)
    lab, sl = label.numpy(), s.numpy()
    assert tuple(m.shape) == (6,) and tuple(s.shape) == (10,) and tuple(sw.shape) == (10, 3)
    assert (sl[m.numpy()] == lab).all(), (sl, m.numpy(), lab)
    assert np.array_equal(w.numpy()[sl], sw.numpy())
    assert len(set(sl.tolist())) == 10
    if sbp == [S0]:
        assert sw.sbp == (S0,) and all(0 <= c < 20 for c in sl[:5]) and all(20 <= c < 40 for c in sl[5:])
    sw.sum().backward()
    grad = np.zeros((40, 3), np.float32)
    grad[sl] = 1
    assert np.array_equal(w.grad.numpy(), grad)
w = flow.randn(40, 3, placement=P, sbp=[S0])
try:
    flow.distributed_partial_fc_sample(w, label, 9)
    raise AssertionError("no error")
except ValueError as e:
    assert "num_sample 9 and the 40 classes must divide over the weight's 2 shards" in str(e), e
few = flow.tensor(np.array([0, 1, 2, 20, 25, 30, 31, 39]), placement=P, sbp=[S0])
try:
    flow.distributed_partial_fc_sample(w, few, 4)
    raise AssertionError("no error")
except ValueError as e:  # shard 1 holds 5 of the batch's classes, each shard samples 2
    assert "a shard holds 5 classes of the batch but samples only 2 (num_sample 4 over 2 shards)" \
        in str(e), e
try:
    flow.distributed_partial_fc_sample(w, flow.tensor(np.array([3, 40]), placement=P, sbp=[B]), 10)
    raise AssertionError("no error")
except ValueError as e:
    assert "labels must be in [0, 40), got [3, 40]" in str(e), e
ok("partial_fc")
