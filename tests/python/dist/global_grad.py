"""Gradients through to_global and to_local, on every rank; prints '<case> ok'."""

import numpy as np

import oneflow as flow
from device import DEVICE  # noqa: E402

rank, world = flow.env.get_rank(), flow.env.get_world_size()
P = flow.placement(DEVICE, ranks=list(range(world)))
S0, B, PS = flow.sbp.split(0), flow.sbp.broadcast, flow.sbp.partial_sum

# A local leaf becomes this rank's rows of a global tensor: its gradient is its rows' gradient.
x = flow.tensor(np.arange(3, dtype=np.float32) + 10 * rank, requires_grad=True)
y = x.to_global(placement=P, sbp=S0)
assert not y.is_leaf
(y * y).sum().backward()
assert np.allclose(x.grad.numpy(), 2 * x.detach().numpy()), x.grad
print("local_to_split ok")

# Parts of a partial sum each see the whole gradient.
x = flow.ones(4, requires_grad=True)
w = flow.arange(4, dtype=flow.float32).to_global(placement=P, sbp=B)
(x.to_global(placement=P, sbp=PS) * w).sum().backward()
assert np.allclose(x.grad.numpy(), np.arange(4)), x.grad
print("local_to_partial ok")

# A global leaf through a layout change: the gradient comes back in the leaf's layout.
g = flow.ones(2 * world, 3, placement=P, sbp=B, requires_grad=True)
wt = flow.arange(6 * world, dtype=flow.float32).reshape(2 * world, 3)
z = g.to_global(sbp=S0) * wt.to_global(placement=P, sbp=B)
z.sum().backward()
assert g.grad.sbp == (B,), g.grad.sbp
assert np.allclose(g.grad.numpy(), wt.numpy())
print("broadcast_to_split ok")

# to_local then a loss every rank computes alike: the gradient of the broadcast tensor.
h = flow.full((3,), 2.0, placement=P, sbp=B, requires_grad=True)
(h.to_local() * 3).sum().backward()
assert np.allclose(h.grad.numpy(), 3.0), h.grad
print("to_local ok")

# Training batch norm on a split batch stays split, with statistics of the whole batch.
import oneflow.nn as nn  # noqa: E402

flow.manual_seed(5)
xs = flow.randn(6, 3, 4, 4) * 2 + 1
ref = nn.BatchNorm2d(3)
glob = nn.BatchNorm2d(3).to_global(placement=P, sbp=B)
xg = xs.to_global(placement=P, sbp=B).to_global(sbp=S0).requires_grad_(True)
xl = xs.clone().requires_grad_(True)
yg, yl = glob(xg), ref(xl)
assert yg.sbp == (S0,), yg.sbp
wts = flow.arange(6 * 3 * 16, dtype=flow.float32).reshape(6, 3, 4, 4) / 100
(yg * wts.to_global(placement=P, sbp=B)).sum().backward()
(yl * wts).sum().backward()
assert np.allclose(yg.numpy(), yl.detach().numpy(), atol=1e-5)
assert np.allclose(xg.grad.numpy(), xl.grad.numpy(), atol=1e-5)
assert np.allclose(glob.weight.grad.numpy(), ref.weight.grad.numpy(), atol=1e-4)
assert np.allclose(glob.running_var.numpy(), ref.running_var.numpy(), atol=1e-6)
print("batch_norm_split ok")

# Double backward where the gradient changes layout on its way to the leaf (a broadcast seed
# for a split output): with create_graph the boxed gradient keeps its history (OneFlow's
# test_global_neg_grad_grad on a (1, 2) mesh is this case).
x = flow.randn(2 * world, 3, placement=P, sbp=S0, requires_grad=True)
seed = flow.randn(2 * world, 3, placement=P, sbp=B, requires_grad=True)
seed2 = flow.randn(2 * world, 3, placement=P, sbp=B)
(gx,) = flow.autograd.grad(x.neg(), x, seed, create_graph=True)
assert gx.requires_grad and gx.sbp == (S0,), (gx.requires_grad, gx.sbp)
(gseed,) = flow.autograd.grad(gx, seed, seed2)
assert gseed.sbp == (B,), gseed.sbp
assert np.allclose(gseed.numpy(), -seed2.numpy())
print("double_backward_boxed ok")

# Data parallel: the partial gradients of broadcast parameters are reduced in one bucket when
# the pass ends; two backward passes accumulate; autograd.grad still returns them reduced.
flow.manual_seed(11)
w1_np, w2_np = np.random.RandomState(1).randn(3, 4), np.random.RandomState(2).randn(4)
xs_np = np.random.RandomState(3).randn(2 * world, 3)
w1 = flow.tensor(w1_np, dtype=flow.float32, placement=P, sbp=B, requires_grad=True)
w2 = flow.tensor(w2_np, dtype=flow.float32, placement=P, sbp=B, requires_grad=True)
xg = flow.tensor(xs_np, dtype=flow.float32, placement=P, sbp=B).to_global(sbp=S0)
for _ in range(2):
    ((xg @ w1).tanh() @ w2).square().sum().backward()
l1 = flow.tensor(w1_np, dtype=flow.float32, requires_grad=True)
l2 = flow.tensor(w2_np, dtype=flow.float32, requires_grad=True)
for _ in range(2):
    ((flow.tensor(xs_np, dtype=flow.float32) @ l1).tanh() @ l2).square().sum().backward()
assert w1.grad.sbp == (B,) and w2.grad.sbp == (B,), (w1.grad.sbp, w2.grad.sbp)
assert np.allclose(w1.grad.numpy(), l1.grad.numpy(), atol=1e-5)
assert np.allclose(w2.grad.numpy(), l2.grad.numpy(), atol=1e-5)
g1, g2 = flow.autograd.grad(((xg @ w1).tanh() @ w2).square().sum(), [w1, w2])
assert g1.sbp == (B,) and np.allclose(2 * g1.numpy(), l1.grad.numpy(), atol=1e-5)
print("bucketed_grads ok")
