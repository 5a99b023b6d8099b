"""SGD and Adam/AdamW on CUDA update every parameter of a device and dtype with one multi-tensor
op (multi_tensor_sgd_update, multi_tensor_adam_update: one launch per list of chunks on a GPU,
core/kernels/cuda/kernels/optim.cuh). Here on the stand-in CUDA device (ONEFLOW_FAKE_CUDA=1,
where the multi-tensor ops run their CPU kernels), against the same optimizer on the CPU, which
updates parameter by parameter: the trajectories must be equal, and the multi-tensor op must be
the one that ran. Its errors are one line naming the op."""

import os
import subprocess
import sys

SCRIPT = r"""
import numpy as np
import oneflow as flow
import oneflow.nn as nn
from oneflow import profiler

def train(device, make_opt, steps=4):
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 9), nn.Tanh(), nn.Linear(9, 3)).to(device)
    opt = make_opt(model.parameters())
    rs = np.random.RandomState(0)
    for _ in range(steps):
        x = flow.tensor(rs.randn(5, 6).astype(np.float32)).to(device)
        loss = (model(x) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.detach().to("cpu").numpy() for p in model.parameters()], opt

makers = {
    "sgd": lambda ps: flow.optim.SGD(ps, lr=0.1),
    "sgd momentum nesterov": lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                                       weight_decay=0.01),
    "adam amsgrad": lambda ps: flow.optim.Adam(ps, lr=0.01, amsgrad=True, weight_decay=0.01),
    "adamw": lambda ps: flow.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
}
for name, make in makers.items():
    cpu, _ = train("cpu", make)
    with profiler.profile() as prof:
        cuda, opt = train("cuda", make)
    names = {e.key for e in prof.key_averages()}
    op = "multi_tensor_" + opt._op
    assert op in names, (name, sorted(names))
    for a, b in zip(cpu, cuda):
        np.testing.assert_array_equal(a, b, err_msg=name)
    if "adam" in name:
        for p in opt.param_groups[0]["params"]:
            assert float(opt.state[p]["step"]) == 4.0
    print(name, "ok", flush=True)

# The op itself: records (param, grad, state..., step) then the shared hypers; one-line errors.
p = [flow.ones(3, device="cuda"), flow.ones(2, 2, device="cuda", dtype=flow.float64)]
g = [flow.ones(3, device="cuda"), flow.ones(2, 2, device="cuda", dtype=flow.float64)]
h = [flow.tensor(v, dtype=flow.float64, device="cuda") for v in (0.1, 0.0)]
try:
    flow._C.optim_update_multi_("sgd_update", [p[0], g[0], p[1], g[1]] + h, 2, {})
    raise AssertionError("mixed dtypes were accepted")
except RuntimeError as e:
    msg = str(e)
    assert msg.startswith("multi_tensor_sgd_update: every parameter must have one dtype"), msg
    assert "\n" not in msg
try:
    flow._C.optim_update_multi_("sgd_update", [p[0], g[0]] + h, 2, {})
    raise AssertionError("a short list was accepted")
except RuntimeError as e:
    assert str(e).startswith("multi_tensor_sgd_update: expected 2 records of 2 tensors"), str(e)
try:
    flow._C.optim_update_multi_("lamb_update", [p[0], g[0]] + h, 1, {})
    raise AssertionError("lamb was accepted")
except RuntimeError as e:
    assert "lamb_update has no multi-tensor form" in str(e), str(e)
print("errors ok", flush=True)
"""


def test_multi_tensor_updates_match_the_per_parameter_ones():
    env = dict(os.environ, ONEFLOW_FAKE_CUDA="1")
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert r.stdout.count(" ok") == 5, r.stdout
