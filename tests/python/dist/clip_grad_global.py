"""clip_grad_norm_, RMSprop and Adagrad on global parameters (broadcast and split) against the
same work on the whole tensors in one process; every rank prints '<case> ok'."""

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from device import DEVICE  # noqa: E402

rank, world = flow.env.get_rank(), flow.env.get_world_size()
P = flow.placement(DEVICE, ranks=list(range(world)))
B, S0, S1 = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1)


def whole(array, sbp):
    """A global tensor whose logical value is array (every rank holds all of it), laid out as sbp
    (a local tensor made global with a split would be this rank's shard instead)."""
    return flow.tensor(array, dtype=flow.float32).to_global(placement=P, sbp=B).to_global(sbp=sbp)


for norm_type, name in ((2.0, "2"), (float("inf"), "inf"), (3.0, "3")):
    rng = np.random.RandomState(0)  # the same values on every rank
    values = [rng.randn(4, 3), rng.randn(6), rng.randn(2, 4), rng.randn(5)]
    grads = [rng.randn(*v.shape) * 3 for v in values]
    sbps = [B, S0, S1, B]
    glob = [nn.Parameter(whole(v, s)) for v, s in zip(values, sbps)]
    for p, g, s in zip(glob, grads, sbps):
        p.grad = whole(g, s)
    local = [nn.Parameter(flow.tensor(v, dtype=flow.float32)) for v in values]
    for p, g in zip(local, grads):
        p.grad = flow.tensor(g, dtype=flow.float32)
    # a split gradient's shard on this rank is only part of it: the norm must not be of the shards
    shard_norm = np.sqrt(sum((p.grad.to_local().numpy() ** 2).sum() for p in glob))
    total_g = nn.utils.clip_grad_norm_(glob, 1.5, norm_type=norm_type)
    total_l = nn.utils.clip_grad_norm_(local, 1.5, norm_type=norm_type)
    assert total_g.is_global and total_g.sbp == (B,) and total_g.placement == P, total_g
    assert np.allclose(total_g.to_local().numpy(), total_l.numpy(), rtol=1e-5), (total_g, total_l)
    assert np.allclose(total_g.numpy(), total_l.numpy(), rtol=1e-5)
    if norm_type == 2.0:
        assert not np.isclose(shard_norm, float(total_l), rtol=1e-3)
    for p, q, s in zip(glob, local, sbps):
        assert p.grad.sbp == (s,), p.grad.sbp
        assert np.allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)
    print(f"broadcast_and_split_{name} ok")

# A model made global, its gradients from a split batch (partial sums reduced by backward).
flow.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
ref = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
ref.load_state_dict(model.state_dict())
model.to_global(placement=P, sbp=B)
x = flow.tensor(np.random.RandomState(1).randn(8, 5), dtype=flow.float32)
(model(x.to_global(placement=P, sbp=B).to_global(sbp=S0)) ** 2).sum().backward()
(ref(x) ** 2).sum().backward()
total_g = nn.utils.clip_grad_norm_(model.parameters(), 0.5)
total_l = nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
assert np.allclose(total_g.numpy(), total_l.numpy(), rtol=1e-5), (total_g, total_l)
for p, q in zip(model.parameters(), ref.parameters()):
    assert np.allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)
print("model ok")

# RMSprop and Adagrad step global parameters (broadcast and split) as one process steps the
# whole ones.
for name, kwargs in (("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.1)),
                     ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.2))):
    rng = np.random.RandomState(2)
    values = [rng.randn(4, 3), rng.randn(6)]
    sbps = [S1, B]
    glob = [nn.Parameter(whole(v, s)) for v, s in zip(values, sbps)]
    local = [nn.Parameter(flow.tensor(v, dtype=flow.float32)) for v in values]
    opt_g = getattr(flow.optim, name)(glob, **kwargs)
    opt_l = getattr(flow.optim, name)(local, **kwargs)
    for step in range(3):
        grads = [rng.randn(*v.shape) for v in values]
        for p, q, g, s in zip(glob, local, grads, sbps):
            p.grad, q.grad = whole(g, s), flow.tensor(g, dtype=flow.float32)
        opt_g.step()
        opt_l.step()
    for p, q, s in zip(glob, local, sbps):
        assert p.sbp == (s,), p.sbp
        assert np.allclose(p.numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6), name
    print(f"{name.lower()}_global ok")
