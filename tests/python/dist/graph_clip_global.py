"""OneFlow's clip_grad param-group settings with global tensors on 2 ranks: nn.Graph clips the
gradients by their global norm (over both ranks' pieces) before each update, as eager global
training with opt.clip_grad() does and as one-process eager training with clip_grad_norm_ does.
Cases, each with norm 2 and with norm inf: a weight split over the ranks (tensor parallel), and
broadcast parameters with ZeRO stage 2 (gradients reduce-scattered).
    usage: graph_clip_global.py   (2 ranks)
"""

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from oneflow import optim

B, S = flow.sbp.broadcast, flow.sbp.split
ALL = flow.placement("cpu", ranks=[0, 1])
rank = flow.env.get_rank()
MAX_NORM = 0.05


class Graph(nn.Graph):
    def __init__(self, model, opt, zero):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        if zero:
            self.config.enable_zero(True, stage=2, shard_min_size=1)

    def build(self, x):
        loss = (self.model(x) ** 2).mean()
        loss.backward()
        return loss


def group(params, norm_type):
    return [{"params": list(params), "clip_grad_max_norm": MAX_NORM, "clip_grad_norm_type": norm_type}]


def whole(t):
    return t.to_global(placement=ALL, sbp=B).to_local().numpy()


for case, weight_sbp, norm_type, zero in (("split weight", S(0), 2.0, False),
                                          ("zero stage 2", B, 2.0, True),
                                          ("split weight, inf", S(0), float("inf"), False),
                                          ("zero stage 2, inf", B, float("inf"), True)):
    flow.manual_seed(5)
    ref = nn.Linear(6, 8)
    models = {}
    for mode in ("graph", "eager"):
        m = nn.Linear(6, 8)
        m.load_state_dict(ref.state_dict())
        m.to_global(placement=ALL, sbp=B)
        with flow.no_grad():
            m.weight = nn.Parameter(m.weight.to_global(sbp=weight_sbp))
        models[mode] = m
    ref_opt = optim.SGD(ref.parameters(), lr=0.5, momentum=0.5)
    g_opt = optim.SGD(group(models["graph"].parameters(), norm_type), lr=0.5, momentum=0.5)
    e_opt = optim.SGD(group(models["eager"].parameters(), norm_type), lr=0.5, momentum=0.5)
    g = Graph(models["graph"], g_opt, zero)
    rng = np.random.RandomState(0)
    clipped = 0
    for step in range(3):
        x = flow.tensor(rng.randn(4, 6).astype(np.float32))
        ref_opt.zero_grad()
        (ref(x) ** 2).mean().backward()
        total = nn.utils.clip_grad_norm_(ref.parameters(), MAX_NORM, norm_type)
        clipped += float(total) > MAX_NORM
        ref_opt.step()
        xg = x.to_global(placement=ALL, sbp=B)
        g(xg)
        e_opt.zero_grad()
        (models["eager"](xg) ** 2).mean().backward()
        e_opt.clip_grad()
        e_opt.step()
    assert clipped == 3, (case, clipped)  # the clip is active in every step
    for mode, m in models.items():
        for (pname, p), q in zip(m.named_parameters(), ref.parameters()):
            np.testing.assert_allclose(whole(p), q.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"{case} {mode} {pname}")
    assert tuple(models["graph"].weight.sbp) == (weight_sbp,), models["graph"].weight.sbp
print(f"rank {rank} clip global ok", flush=True)
