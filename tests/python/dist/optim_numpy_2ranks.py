"""Every optimizer case and every scheduler case of test_optim_oneflow.py on 2 ranks, against the
same NumPy transcriptions of OneFlow's formulas: eager global training, nn.Graph, and nn.Graph with
ZeRO stage 2 (state and gradients sharded; not LAMB, whose update reads whole norms).
    usage: optim_numpy_2ranks.py   (2 ranks)
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import test_optim_oneflow as T  # noqa: E402  (the cases and their NumPy formulas)

import oneflow as flow  # noqa: E402
import oneflow.nn as nn  # noqa: E402

B = flow.sbp.broadcast
ALL = flow.placement("cpu", ranks=[0, 1])
rank = flow.env.get_rank()
STEPS = 3
X = flow.zeros(1, dtype=flow.float64).to_global(placement=ALL, sbp=B)


class GlobalQuadratic(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(flow.tensor(T.W0, dtype=flow.float64).to_global(placement=ALL, sbp=B))
        self.c = flow.tensor(T.C, dtype=flow.float64).to_global(placement=ALL, sbp=B)

    def forward(self):
        return (self.c * self.w * self.w).sum()


class Graph(nn.Graph):
    def __init__(self, model, opt, sched=None, zero=False):
        super().__init__()
        self.model = model
        self.add_optimizer(opt, lr_sch=sched)
        if zero:
            self.config.enable_zero(True, stage=2, shard_min_size=1)

    def build(self, x):
        loss = self.model() + x.sum() * 0
        loss.backward()
        return loss


def whole(t):
    return t.to_global(placement=ALL, sbp=B).to_local().numpy()


def run(make, mode, sched=None):
    model = GlobalQuadratic()
    opt = make(list(model.parameters()))
    out = []
    if mode == "eager":
        for _ in range(STEPS):
            opt.zero_grad()
            model().backward()
            opt.step()
            out.append(whole(model.w))
    else:
        g = Graph(model, opt, sched(opt) if sched else None, zero=(mode == "graph_zero"))
        for _ in range(STEPS):
            g(X)
            out.append(whole(model.w))
        if mode == "graph_zero":  # each rank holds its piece of w's state
            big = [v for v in opt.state[model.w].values() if isinstance(v, flow.Tensor) and v.ndim == 2]
            assert all(tuple(v.sbp) == (flow.sbp.split(0),) for v in big), [v.sbp for v in big]
    return out


checked = 0
for name, (make, np_step) in sorted(T.CASES.items()):
    ref = T._reference(np_step, STEPS)
    modes = ("eager", "graph") if name.startswith("lamb") else ("eager", "graph", "graph_zero")
    for mode in modes:
        for t, (a, b) in enumerate(zip(run(make, mode), ref)):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11, err_msg=f"{name} {mode} step {t + 1}")
        checked += 1

base = 0.5
for name, (make_sched, lr_at) in sorted(T.SCHEDULERS.items()):
    for mode in ("graph", "graph_zero"):
        got = run(lambda ps: flow.optim.SGD(ps, lr=base), mode, make_sched)
        w = T.W0.copy()
        for t in range(STEPS):
            w = w - lr_at(base, t) * T._grad(w)
            np.testing.assert_allclose(got[t], w, rtol=1e-9, atol=1e-12, err_msg=f"{name} {mode} step {t + 1}")
        checked += 1
print(f"rank {rank} {checked} optimizer and scheduler runs match numpy ok", flush=True)
