"""Each optimizer in nn.Graph with ZeRO stage 2 on 2 ranks (state split(0), gradients
reduce-scattered; LAMB, whose trust ratio needs whole norms, is refused in one line), checked against
one-process eager training of the same model with the same optimizer. Its hyper-parameters
change between replays through a scheduler, read from their tensors.
    usage: graph_optim_zero.py   (2 ranks)
"""

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from oneflow import optim

B, S = flow.sbp.broadcast, flow.sbp.split
ALL = flow.placement("cpu", ranks=[0, 1])
rank = flow.env.get_rank()

OPTIMIZERS = {
    "sgd": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.2, nesterov=True),
    "adamw": lambda ps: optim.AdamW(ps, lr=1e-2, weight_decay=0.05, do_bias_correction=False),
    "adagrad": lambda ps: optim.Adagrad(ps, lr=0.05, lr_decay=0.01),
    "rmsprop": lambda ps: optim.RMSprop(ps, lr=1e-2, centered=True),
    "adadelta": lambda ps: optim.Adadelta(ps, lr=0.5),
    "ftrl": lambda ps: flow.one_embedding.Ftrl(ps, lr=0.1, lambda1=1e-3),
}


class Graph(nn.Graph):
    def __init__(self, model, opt, sched):
        super().__init__()
        self.model = model
        self.add_optimizer(opt, lr_sch=sched)
        self.config.enable_zero(True, stage=2, shard_min_size=1)

    def build(self, x):
        loss = (self.model(x) ** 2).mean()
        loss.backward()
        return loss


for name, make in OPTIMIZERS.items():
    flow.manual_seed(3)
    ref = nn.Linear(6, 8)
    glob = nn.Linear(6, 8)
    glob.load_state_dict(ref.state_dict())
    glob.to_global(placement=ALL, sbp=B)
    ref_opt, opt = make(ref.parameters()), make(glob.parameters())
    ref_sched = optim.lr_scheduler.ExponentialLR(ref_opt, gamma=0.7)
    g = Graph(glob, opt, optim.lr_scheduler.ExponentialLR(opt, gamma=0.7))
    rng = np.random.RandomState(0)
    for step in range(3):
        x = flow.tensor(rng.randn(4, 6).astype(np.float32))
        ref_opt.zero_grad()
        (ref(x) ** 2).mean().backward()
        ref_opt.step()
        ref_sched.step()
        g(x.to_global(placement=ALL, sbp=B).to_global(sbp=S(0)))
    assert len(g._compiled) == 1, name
    for (pname, p), q in zip(glob.named_parameters(), ref.parameters()):
        whole = p.to_global(placement=ALL, sbp=B).to_local().numpy()
        np.testing.assert_allclose(whole, q.numpy(), rtol=1e-5, atol=1e-6, err_msg=f"{name} {pname}")
    state = opt.state[glob.weight]
    big = [v for v in state.values() if isinstance(v, flow.Tensor) and v.ndim == 2]
    assert big and all(tuple(v.sbp) == (S(0),) for v in big), (name, [v.sbp for v in big])

lamb_model = nn.Linear(6, 8)
lamb_model.to_global(placement=ALL, sbp=B)
lamb = optim.LAMB(lamb_model.parameters())
try:
    Graph(lamb_model, lamb, None)(flow.randn(4, 6).to_global(placement=ALL, sbp=B))
    raise AssertionError("LAMB with ZeRO was not refused")
except ValueError as e:
    assert str(e) == ("nn.Graph Graph: config.enable_zero cannot shard LAMB's state: its update reads "
                      "whole parameters (a norm over each); use ZeRO with an elementwise optimizer"), e
print(f"rank {rank} zero optimizers ok", flush=True)
