"""Every optimizer against a NumPy transcription of OneFlow's update formula, eagerly and inside
nn.Graph (where the learning rate, betas and step counts are tensors the plan reads), the
schedulers OneFlow adds, OneFlow's param-group keys (lr_scale, clip_grad_*), and one 2-rank
ZeRO run of each optimizer.

The loss is sum(c * w * w) for a fixed c, so the gradient is 2 * c * w, written out in NumPy.
"""

import contextlib
import math
import os

import numpy as np
import pytest

import oneflow as flow
import oneflow.nn as nn
from oneflow import optim
from test_comm import DIST, free_port, launch

W0 = np.array([[0.5, -1.2, 2.0, 0.3], [-0.7, 1.1, -0.2, 0.9], [1.5, -0.4, 0.8, -2.2]])
C = np.array([1.0, 2.0, 0.5, 3.0])


class Quadratic(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(flow.tensor(W0, dtype=flow.float64))
        self.c = flow.tensor(C, dtype=flow.float64)

    def forward(self):
        return (self.c * self.w * self.w).sum()


class TrainGraph(nn.Graph):
    def __init__(self, model, opt, sched=None):
        super().__init__()
        self.model = model
        self.add_optimizer(opt, lr_sch=sched)

    def build(self, x):
        loss = self.model() + x.sum() * 0
        loss.backward()
        return loss


def _grad(w):
    return 2 * C * w


# ---------------------------------------------------------------- OneFlow's formulas in NumPy


def np_sgd(lr, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0, maximize=False):
    def step(w, s, t):
        d = _grad(w) + weight_decay * w
        sign = -1 if maximize and momentum != 0 else 1  # OneFlow: maximize needs momentum
        if momentum == 0:
            return w - lr * d
        s["buf"] = momentum * s.get("buf", 0) + (1 - dampening) * d
        return w - sign * lr * (d + momentum * s["buf"] if nesterov else s["buf"])
    return step


def np_adam(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, do_bias_correction=True,
            decoupled=False):
    b1, b2 = betas

    def step(w, s, t):
        d = _grad(w) + (0 if decoupled else weight_decay * w)
        s["m"] = b1 * s.get("m", 0) + (1 - b1) * d
        s["v"] = b2 * s.get("v", 0) + (1 - b2) * d * d
        v = s["v"]
        if amsgrad:
            s["vmax"] = np.maximum(s.get("vmax", 0), v)
            v = s["vmax"]
        bc1 = 1 - b1 ** t if do_bias_correction else 1
        bc2 = 1 - b2 ** t if do_bias_correction else 1
        out = w - lr / bc1 * s["m"] / (np.sqrt(v) / np.sqrt(bc2) + eps)
        return out - (lr * weight_decay * w if decoupled else 0)
    return step


def np_lamb(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, adam_w_mode=True, do_bias_correction=True):
    b1, b2 = betas

    def step(w, s, t):
        d = _grad(w) + (0 if adam_w_mode else weight_decay * w)
        s["m"] = b1 * s.get("m", 0) + (1 - b1) * d
        s["v"] = b2 * s.get("v", 0) + (1 - b2) * d * d
        bc1 = 1 - b1 ** t if do_bias_correction else 1
        bc2 = 1 - b2 ** t if do_bias_correction else 1
        r = (s["m"] / bc1) / (np.sqrt(s["v"]) / np.sqrt(bc2) + eps)
        wn, rn = np.linalg.norm(w), np.linalg.norm(r)
        trust = wn / rn if wn > 0 and rn > 0 else 1.0
        return w - lr * trust * (r + (weight_decay * w if adam_w_mode else 0))
    return step


def np_adagrad(lr, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
    def step(w, s, t):
        d = _grad(w) + weight_decay * w
        s["sum"] = s.get("sum", initial_accumulator_value) + d * d
        return w - lr / (1 + (t - 1) * lr_decay) * d / (np.sqrt(s["sum"]) + eps)
    return step


def np_rmsprop(lr, alpha=0.99, eps=1e-8, weight_decay=0.0, centered=False):
    def step(w, s, t):
        d = _grad(w) + weight_decay * w
        s["sa"] = alpha * s.get("sa", 0) + (1 - alpha) * d * d
        var = s["sa"]
        if centered:
            s["ga"] = alpha * s.get("ga", 0) + (1 - alpha) * d
            var = var - s["ga"] ** 2
        return w - lr * d / np.sqrt(var + eps)  # OneFlow: eps inside the root
    return step


def np_adadelta(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0):
    def step(w, s, t):
        d = _grad(w) + weight_decay * w
        s["sa"] = rho * s.get("sa", 0) + (1 - rho) * d * d
        delta = np.sqrt(s.get("acc", 0) + eps) / np.sqrt(s["sa"] + eps) * d
        s["acc"] = rho * s.get("acc", 0) + (1 - rho) * delta * delta
        return w - lr * delta
    return step


def np_ftrl(lr, weight_decay=0.0, lr_power=-0.5, initial_accumulator_value=0.1, lambda1=0.0, lambda2=0.0,
            beta=0.0):
    def step(w, s, t):
        d = _grad(w) + weight_decay * w
        n = s.get("n", initial_accumulator_value)
        n2 = n + d * d
        sigma = (n2 ** lr_power - n ** lr_power) / lr
        s["z"] = s.get("z", 0) + d - sigma * w
        s["n"] = n2
        z = s["z"]
        upd = (np.sign(z) * lambda1 - z) / ((beta + n2 ** lr_power) / lr + lambda2)
        return np.where(np.abs(z) < lambda1, 0.0, upd)
    return step


CASES = {
    "sgd": (lambda ps: optim.SGD(ps, lr=0.05), np_sgd(0.05)),
    "sgd_dampening": (lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01),
                      np_sgd(0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    "sgd_nesterov_dampening": (lambda ps: optim.SGD(ps, lr=0.05, momentum=0.8, dampening=0.2, nesterov=True),
                               np_sgd(0.05, momentum=0.8, dampening=0.2, nesterov=True)),
    "sgd_maximize": (lambda ps: optim.SGD(ps, lr=0.01, momentum=0.5, maximize=True),
                     np_sgd(0.01, momentum=0.5, maximize=True)),
    "sgd_maximize_without_momentum": (lambda ps: optim.SGD(ps, lr=0.01, maximize=True),
                                      np_sgd(0.01, maximize=True)),
    "adam": (lambda ps: optim.Adam(ps, lr=0.05, weight_decay=0.1), np_adam(0.05, weight_decay=0.1)),
    "adam_no_bias_correction": (lambda ps: optim.Adam(ps, lr=0.05, do_bias_correction=False, amsgrad=True),
                                np_adam(0.05, do_bias_correction=False, amsgrad=True)),
    "adamw": (lambda ps: optim.AdamW(ps, lr=0.05, betas=(0.8, 0.9), weight_decay=0.2),
              np_adam(0.05, betas=(0.8, 0.9), weight_decay=0.2, decoupled=True)),
    "adamw_group_no_bias_correction": (
        lambda ps: optim.AdamW([{"params": ps, "do_bias_correction": False, "amsgrad": True}], lr=0.05,
                               weight_decay=0.1),
        np_adam(0.05, weight_decay=0.1, do_bias_correction=False, amsgrad=True, decoupled=True)),
    "lamb": (lambda ps: optim.LAMB(ps, lr=0.05, weight_decay=0.1), np_lamb(0.05, weight_decay=0.1)),
    "lamb_l2": (lambda ps: optim.LAMB(ps, lr=0.05, weight_decay=0.1, adam_w_mode=False, do_bias_correction=False),
                np_lamb(0.05, weight_decay=0.1, adam_w_mode=False, do_bias_correction=False)),
    "adagrad": (lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.05, weight_decay=0.01, initial_accumulator_value=0.2),
                np_adagrad(0.1, lr_decay=0.05, weight_decay=0.01, initial_accumulator_value=0.2)),
    "rmsprop": (lambda ps: optim.RMSprop(ps, lr=0.01, weight_decay=0.01), np_rmsprop(0.01, weight_decay=0.01)),
    "rmsprop_centered": (lambda ps: optim.RMSprop(ps, lr=0.01, alpha=0.9, eps=1e-3, centered=True),
                         np_rmsprop(0.01, alpha=0.9, eps=1e-3, centered=True)),
    "adadelta": (lambda ps: optim.Adadelta(ps, lr=0.5, rho=0.8, weight_decay=0.01),
                 np_adadelta(0.5, rho=0.8, weight_decay=0.01)),
    "ftrl": (lambda ps: flow.one_embedding.Ftrl(ps, lr=0.2, weight_decay=0.01, lambda1=0.05, lambda2=0.1, beta=0.3),
             np_ftrl(0.2, weight_decay=0.01, lambda1=0.05, lambda2=0.1, beta=0.3)),
}


def _reference(np_step, steps, lrs=None):
    w, s, out = W0.copy(), {}, []
    for t in range(1, steps + 1):
        w = np_step(w, s, t)
        out.append(w.copy())
    return out


def _eager(make, steps):
    model = Quadratic()
    opt = make(list(model.parameters()))
    out = []
    for _ in range(steps):
        opt.zero_grad()
        model().backward()
        opt.step()
        out.append(model.w.numpy().copy())
    return out


def _graph(make, steps):
    model = Quadratic()
    g = TrainGraph(model, make(list(model.parameters())))
    out = []
    for _ in range(steps):
        g(flow.zeros(1, dtype=flow.float64))
        out.append(model.w.numpy().copy())
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_optimizer_matches_oneflows_formula_eager_and_in_graph(name):
    make, np_step = CASES[name]
    ref = _reference(np_step, 4)
    for mode, got in (("eager", _eager(make, 4)), ("graph", _graph(make, 4))):
        for t, (a, b) in enumerate(zip(got, ref)):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11, err_msg=f"{name} {mode} step {t + 1}")


class _ScaledGraph(TrainGraph):
    def build(self, x):
        loss = self.model() * x.sum()  # x = 1: the plain loss; x = inf: inf gradients
        loss.backward()
        return loss


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_optimizer_under_a_grad_scaler_in_graph(name):
    # The loss is scaled by 2**10, the gradients unscaled before the update (exact in float64),
    # and a step whose gradients hold inf is skipped: the parameters and the optimizer's state
    # and step count stay, and the scale backs off. Then training goes on as the formula says.
    make, np_step = CASES[name]
    model = Quadratic()
    opt = make(list(model.parameters()))
    g = _ScaledGraph(model, opt)
    scaler = flow.amp.GradScaler(init_scale=2.0 ** 10, growth_interval=1000)
    g.set_grad_scaler(scaler)
    ref = _reference(np_step, 3)
    one = flow.ones(1, dtype=flow.float64)
    g(one)
    np.testing.assert_allclose(model.w.numpy(), ref[0], rtol=1e-9, atol=1e-11, err_msg=name)
    g(flow.tensor([float("inf")], dtype=flow.float64))
    np.testing.assert_allclose(model.w.numpy(), ref[0], rtol=1e-9, atol=1e-11, err_msg=f"{name} skipped")
    assert scaler.get_scale() == 2.0 ** 9
    for t in (1, 2):
        g(one)
        np.testing.assert_allclose(model.w.numpy(), ref[t], rtol=1e-9, atol=1e-11, err_msg=f"{name} {t + 1}")


def test_graph_reads_a_new_learning_rate_without_recompiling():
    model = Quadratic()
    opt = optim.Adam(model.parameters(), lr=0.1)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    g = TrainGraph(model, opt, sched)
    lrs = []
    for _ in range(4):
        lrs.append(opt.param_groups[0]["lr"])
        g(flow.zeros(1, dtype=flow.float64))
    assert lrs == [0.1, 0.05, 0.025, 0.0125] and len(g._compiled) == 1
    w, s = W0.copy(), {}
    for t, lr in enumerate(lrs, 1):
        w = np_adam(lr)(w, s, t)
    np.testing.assert_allclose(model.w.numpy(), w, rtol=1e-9)
    package = os.path.dirname(flow.nn.graph.__file__)  # nn/graph/: no file edits ops by name
    sources = [open(os.path.join(package, f)).read() for f in os.listdir(package)
               if f.endswith(".py")]
    assert len(sources) > 3 and not [s for s in sources if "set_attr" in s]


def test_lr_scale_and_clip_grad_in_param_groups():
    clip, norm_type, scale = 1.5, 2.0, 0.5
    for mode in ("eager", "graph"):
        model = Quadratic()
        opt = optim.SGD([{"params": model.parameters(), "lr_scale": scale, "clip_grad_max_norm": clip,
                          "clip_grad_norm_type": norm_type}], lr=0.1)
        g = TrainGraph(model, opt) if mode == "graph" else None
        w = W0.copy()
        for _ in range(3):
            if g is not None:
                g(flow.zeros(1, dtype=flow.float64))  # the graph clips before each update
            else:
                opt.zero_grad()
                model().backward()
                opt.clip_grad()  # eager: explicit, as OneFlow
                with pytest.warns(UserWarning, match="lr_scale applies in nn.Graph only") \
                        if _ == 0 else contextlib.nullcontext():
                    opt.step()
            grad = _grad(w)
            total = np.linalg.norm(grad)
            if clip / (total + 1e-6) < 1:
                grad = grad * clip / (total + 1e-6)
            w = w - 0.1 * (scale if mode == "graph" else 1.0) * grad  # lr_scale: graph only (OneFlow)
        np.testing.assert_allclose(model.w.numpy(), w, rtol=1e-6, err_msg=mode)


def test_param_group_keys_are_understood_or_refused():
    p = nn.Parameter(flow.ones(2))
    with pytest.raises(ValueError) as info:
        optim.Adam([{"params": [p], "do_bias_corection": False}])
    assert str(info.value).startswith("Adam: unknown param-group key 'do_bias_corection' (it takes ")
    with pytest.raises(ValueError) as info:
        optim.SGD([{"params": [p], "clip_grad_max_norm": 1.0}])
    assert str(info.value) == ("SGD: a param group needs both clip_grad_max_norm and clip_grad_norm_type "
                               "to clip gradients, got only one")
    with pytest.raises(ValueError) as info:
        optim.Adam([p], fused=True)
    assert str(info.value).startswith("Adam: fused=True is not supported")
    assert optim.Adam([p], do_bias_correction=False).param_groups[0]["do_bias_correction"] is False
    assert optim.SGD([], lr=0.1).param_groups[0]["params"] == []  # empty lists, as OneFlow


def test_state_dict_keys_and_step_counts():
    model = Quadratic()
    opt = optim.Adadelta(model.parameters())
    model().backward()
    opt.step()
    sd = opt.state_dict()
    assert sorted(sd["state"][0]) == ["acc_delta", "square_avg", "step"]
    assert float(sd["state"][0]["step"]) == 1.0
    # OneFlow's key names and an int step (older checkpoints) load too.
    renamed = {"state": {0: {"square_avgs": sd["state"][0]["square_avg"], "acc_deltas": sd["state"][0]["acc_delta"],
                             "step": 1}}, "param_groups": sd["param_groups"]}
    opt2 = optim.Adadelta(Quadratic().parameters())
    opt2.load_state_dict(renamed)
    state = list(opt2.state.values())[0]
    assert sorted(state) == ["acc_delta", "square_avg", "step"] and state["step"].dtype == flow.float64


def test_two_ranks_graph_clips_global_gradients_as_eager():
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(DIST, "graph_clip_global.py"), timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = sorted(line.split("] ", 1)[-1] for line in r.stdout.splitlines() if line.endswith(" ok"))
    assert lines == [f"rank {k} clip global ok" for k in range(2)]


def test_two_ranks_each_optimizer_and_scheduler_match_numpy_eager_graph_and_zero():
    # tests/python/dist/optim_numpy_2ranks.py: CASES and SCHEDULERS below, on 2 ranks.
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(DIST, "optim_numpy_2ranks.py"), timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    runs = 3 * len(CASES) - sum(name.startswith("lamb") for name in CASES) + 2 * len(SCHEDULERS)
    lines = sorted(line.split("] ", 1)[-1] for line in r.stdout.splitlines() if line.endswith(" ok"))
    assert lines == [f"rank {k} {runs} optimizer and scheduler runs match numpy ok" for k in range(2)]


def test_two_ranks_zero_graph_equals_eager_for_each_optimizer():
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(DIST, "graph_optim_zero.py"), timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = sorted(line.split("] ", 1)[-1] for line in r.stdout.splitlines() if line.endswith(" ok"))
    assert lines == [f"rank {k} zero optimizers ok" for k in range(2)]


# ---------------------------------------------------------------- OneFlow's schedulers

L = optim.lr_scheduler


def _np_cosine_decay(base, step, decay_steps, alpha):
    if step >= decay_steps:
        return base * alpha
    return base * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * step / decay_steps)) + alpha)


def _np_warm_restarts(base, step, T_0, T_mult, eta_min, decay_rate):
    cycle, length, into = 0, T_0, step
    while into >= length:
        into, length, cycle = into - length, length * T_mult, cycle + 1
    return eta_min + (base * decay_rate ** cycle - eta_min) * 0.5 * (1 + math.cos(math.pi * into / length))


SCHEDULERS = {
    "exponential": (lambda o: L.ExponentialLR(o, gamma=0.8), lambda b, t: b * 0.8 ** t),
    "constant": (lambda o: L.ConstantLR(o, factor=0.25, total_iters=3), lambda b, t: b * (0.25 if t < 3 else 1)),
    "cosine_decay": (lambda o: L.CosineDecayLR(o, decay_steps=5, alpha=0.1),
                     lambda b, t: _np_cosine_decay(b, t, 5, 0.1)),
    "polynomial": (lambda o: L.PolynomialLR(o, decay_batch=4, end_learning_rate=0.01, power=2.0),
                   lambda b, t: (b - 0.01) * (1 - min(t, 4) / 4) ** 2 + 0.01),
    "warm_restarts": (lambda o: L.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=0.01, decay_rate=0.5),
                      lambda b, t: _np_warm_restarts(b, t, 2, 2, 0.01, 0.5)),
    "warmup_cosine_decay": (
        lambda o: L.WarmupLR(L.CosineDecayLR(o, decay_steps=6), warmup_factor=0.1, warmup_iters=3),
        lambda b, t: (b * 0.1 + (_np_cosine_decay(b, 3, 6, 0) - b * 0.1) * t / 3) if t < 3
        else _np_cosine_decay(b, t, 6, 0)),
    "warmup_prefix_constant": (
        lambda o: L.WarmupLR(L.ExponentialLR(o, gamma=0.5), warmup_factor=0.2, warmup_iters=2,
                             warmup_method="constant", warmup_prefix=True),
        lambda b, t: b * 0.2 if t < 2 else b * 0.5 ** (t - 2)),
    "warmup_from_optimizer_alias": (  # OneFlow's older name, warming up the optimizer's own lr
        lambda o: L.WarmUpLR(o, warmup_factor=0.25, warmup_iters=4, warmup_method="linear"),
        lambda b, t: b * 0.25 + (b - b * 0.25) * t / 4 if t < 4 else b),
    "step": (lambda o: L.StepLR(o, step_size=2, gamma=0.5), lambda b, t: b * 0.5 ** (t // 2)),
    "multistep": (lambda o: L.MultiStepLR(o, milestones=[1, 3], gamma=0.1),
                  lambda b, t: b * 0.1 ** sum(m <= t for m in (1, 3))),
    "linear": (lambda o: L.LinearLR(o, start_factor=0.2, end_factor=1.0, total_iters=4),
               lambda b, t: b * (0.2 + 0.8 * min(t, 4) / 4)),
    "cosine_annealing": (lambda o: L.CosineAnnealingLR(o, T_max=4, eta_min=0.05),
                         lambda b, t: 0.05 + (b - 0.05) * (1 + math.cos(math.pi * t / 4)) / 2),
    "lambda": (lambda o: L.LambdaLR(o, lr_lambda=lambda t: 1 / (t + 1)), lambda b, t: b / (t + 1)),
    "multiplicative": (lambda o: L.MultiplicativeLR(o, lr_lambda=lambda t: 0.9), lambda b, t: b * 0.9 ** t),
    "chained_constant_exponential": (  # OneFlow's chain: closed forms applied in turn
        lambda o: L.ChainedScheduler([L.ConstantLR(o, factor=0.1, total_iters=2), L.ExponentialLR(o, gamma=0.9)]),
        lambda b, t: b * (0.1 if t < 2 else 1) * 0.9 ** t),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_matches_oneflows_formula_eager_and_in_graph(name):
    make, lr_at = SCHEDULERS[name]
    base = 0.5
    want = [lr_at(base, t) for t in range(8)]
    p = nn.Parameter(flow.ones(1))
    opt = optim.SGD([p], lr=base)
    sched = make(opt)
    got = []
    for _ in range(8):
        got.append(opt.param_groups[0]["lr"])
        sched.step()
    np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=name)
    # In nn.Graph: each replay's SGD step uses that step's lr (read from the lr tensor).
    model = Quadratic()
    opt = optim.SGD(model.parameters(), lr=base)
    g = TrainGraph(model, opt, make(opt))
    w = W0.copy()
    for t in range(5):
        g(flow.zeros(1, dtype=flow.float64))
        w = w - want[t] * _grad(w)
    np.testing.assert_allclose(model.w.numpy(), w, rtol=1e-9, atol=1e-12, err_msg=name)
    assert len(g._compiled) == 1


# ---------------------------------------------------------------- nn.Graph surface


def test_chained_scheduler_refusals_and_state_dict():
    p = nn.Parameter(flow.ones(1))
    opt, other = optim.SGD([p], lr=1.0), optim.SGD([nn.Parameter(flow.ones(1))], lr=1.0)
    with pytest.raises(ValueError) as info:
        L.ChainedScheduler([L.ExponentialLR(opt, gamma=0.5), L.ExponentialLR(other, gamma=0.5)])
    assert str(info.value) == ("ChainedScheduler: scheduler 1 (ExponentialLR) belongs to another "
                               "optimizer than scheduler 0")
    with pytest.raises(ValueError, match=r"^ChainedScheduler: scheduler 0 \(ReduceLROnPlateau\) has no "
                                         "closed form"):
        L.ChainedScheduler([L.ReduceLROnPlateau(opt)])
    chain = L.ChainedScheduler([L.ConstantLR(opt, factor=0.5, total_iters=3), L.ExponentialLR(opt, gamma=0.5)])
    for _ in range(2):
        chain.step()
    sd = chain.state_dict()
    opt2 = optim.SGD([nn.Parameter(flow.ones(1))], lr=1.0)
    chain2 = L.ChainedScheduler([L.ConstantLR(opt2, factor=0.5, total_iters=3), L.ExponentialLR(opt2, gamma=0.5)])
    chain2.load_state_dict(sd)
    chain.step()
    chain2.step()
    assert opt.param_groups[0]["lr"] == opt2.param_groups[0]["lr"] == 1.0 * 0.5 ** 3


def test_depend_int32_targets_session_and_refusals():
    import oneflow.framework.session_context as session_ctx
    from oneflow.framework.multi_client_session import MultiClientSession

    class DependGraph(nn.Graph):
        def build(self, x):
            y = x * 2
            z = nn.functional.depend(x + 1, y)
            return nn.functional.depend(z, [y, x])

    x = flow.randn(3, 4)
    np.testing.assert_allclose(DependGraph()(x).numpy(), x.numpy() + 1)
    with pytest.raises(TypeError) as info:
        nn.functional.depend(x, [1])
    assert str(info.value) == "depend: expected a Tensor or a list of Tensors to depend on, got int"
    logits = flow.randn(4, 5)
    for fn in (nn.functional.cross_entropy, lambda a, t: nn.functional.nll_loss(a.log_softmax(1), t)):
        a = fn(logits, flow.tensor([0, 3, 1, 4], dtype=flow.int32))
        b = fn(logits, flow.tensor([0, 3, 1, 4], dtype=flow.int64))
        np.testing.assert_allclose(a.numpy(), b.numpy())
    sess = session_ctx.GetDefaultSession()
    assert isinstance(sess, MultiClientSession)
    sess.TryInit()
    assert sess.status == sess.Status.INITED
    w = nn.Parameter(flow.ones(2))
    assert w.to(flow.Tensor) is w
    assert flow.nn.optimizer.LAMB is optim.LAMB and flow.nn.optimizer.lr_scheduler is L  # OneFlow's path
    with pytest.raises(NotImplementedError) as info:
        nn.OFRecordReader("/data", batch_size=2)
    assert str(info.value).startswith("nn.OFRecordReader: OneFlow's OFRecord reader is not supported")


def test_graph_takes_non_contiguous_inputs():
    class Eval(nn.Graph):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def build(self, x):
            return self.lin(x)

    g = Eval()
    x = flow.randn(3, 5).t()
    assert not x.is_contiguous()
    np.testing.assert_allclose(g(x).numpy(), g.lin(x.contiguous()).numpy(), rtol=1e-6)
    y = flow.randn(3, 5).t()
    np.testing.assert_allclose(g(y).numpy(), g.lin(y.contiguous()).numpy(), rtol=1e-6)


def test_graph_refuses_an_optimizer_whose_step_is_not_update_ops():
    class Custom(optim.Optimizer):
        def step(self, closure=None):
            for p in self.param_groups[0]["params"]:
                p.sub_(p.grad * self.param_groups[0]["lr"])

    model = Quadratic()
    with pytest.raises(TypeError) as info:
        TrainGraph(model, Custom(model.parameters(), {"lr": 0.1}))
    assert str(info.value) == ("nn.Graph TrainGraph: add_optimizer got Custom, whose step() does not run "
                               "oneflow.optim's update ops (core/optim.h); a replay could not follow its "
                               "hyper-parameters")


def test_swa_utils_match_torch():
    import torch
    from torch.optim import swa_utils as tswa

    from oneflow.optim import swa_utils

    # SWALR: the lrs of 8 steps, cos and linear, two groups.
    for strategy in ("cos", "linear"):
        tp = [torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))]
        fp = [nn.Parameter(flow.ones(1)), nn.Parameter(flow.ones(1))]
        topt = torch.optim.SGD([{"params": tp[:1], "lr": 0.5}, {"params": tp[1:], "lr": 0.1}], lr=1.0)
        fopt = optim.SGD([{"params": fp[:1], "lr": 0.5}, {"params": fp[1:], "lr": 0.1}], lr=1.0)
        ts = tswa.SWALR(topt, swa_lr=[0.05, 0.2], anneal_epochs=3, anneal_strategy=strategy)
        fs = swa_utils.SWALR(fopt, swa_lr=[0.05, 0.2], anneal_epochs=3, anneal_strategy=strategy)
        for _ in range(8):
            np.testing.assert_allclose([g["lr"] for g in fopt.param_groups],
                                       [g["lr"] for g in topt.param_groups], rtol=1e-12)
            ts.step()
            fs.step()
    # AveragedModel: the running mean of 3 snapshots; update_bn: statistics of the whole pass.
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    avg = swa_utils.AveragedModel(model)
    snapshots = []
    for k in range(3):
        with flow.no_grad():
            model[0].weight.mul_(1.5).add_(0.1 * k)
        snapshots.append(model[0].weight.numpy().copy())
        avg.update_parameters(model)
    np.testing.assert_allclose(avg.module[0].weight.numpy(), np.mean(snapshots, axis=0), rtol=1e-6)
    assert int(avg.n_averaged.item()) == 3
    batches = [flow.randn(5, 3) for _ in range(3)]
    swa_utils.update_bn(batches, avg)
    with flow.no_grad():
        h = flow.cat([avg.module[0](b) for b in batches]).numpy()
    np.testing.assert_allclose(avg.module[1].running_mean.numpy(), h.mean(0), rtol=1e-5, atol=1e-6)
    assert avg.module[1].momentum == 0.1 and avg.training  # momentum and mode restored


# ---------------------------------------------------------------- OneFlow's step count


class _TwoParams(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(flow.tensor(W0, dtype=flow.float64))
        self.v = nn.Parameter(flow.tensor(W0[0], dtype=flow.float64))
        self.c = flow.tensor(C, dtype=flow.float64)

    def forward(self, with_v):
        loss = (self.c * self.w * self.w).sum()
        return loss + ((self.c * self.v * self.v).sum() if with_v else 0)


def test_one_step_count_per_optimizer_as_oneflow():
    # v has no gradient in the first step: OneFlow's Adam counts step() calls, so v's first
    # update already uses t = 2 in its bias correction (PyTorch's per-parameter count: t = 1).
    model = _TwoParams()
    opt = optim.Adam(model.parameters(), lr=0.05)
    for with_v in (False, True, True):
        opt.zero_grad()
        model(with_v).backward()
        opt.step()
    w, sw, v, sv = W0.copy(), {}, W0[0].copy(), {}
    for t in (1, 2, 3):
        w = np_adam(0.05)(w, sw, t)
    for t in (2, 3):
        v = np_adam(0.05)(v, sv, t)
    np.testing.assert_allclose(model.w.numpy(), w, rtol=1e-10)
    np.testing.assert_allclose(model.v.numpy(), v, rtol=1e-10)
    v_pytorch, sv_pytorch = W0[0].copy(), {}
    for t in (1, 2):  # PyTorch's count: v's own updates
        v_pytorch = np_adam(0.05)(v_pytorch, sv_pytorch, t)
    assert not np.allclose(model.v.numpy(), v_pytorch, rtol=1e-6)
    # Both forms in the state dict: OneFlow's state["step"], PyTorch's per parameter.
    sd = opt.state_dict()
    assert sd["state"]["step"] == 3
    assert [float(sd["state"][i]["step"]) for i in (0, 1)] == [3.0, 3.0]


def _resumed_adam(state_of, count_key):
    """Two Adam steps, a state dict rewritten by state_of, a fresh optimizer loading it, one
    more step: the result against NumPy's three steps."""
    model = Quadratic()
    opt = optim.Adam(model.parameters(), lr=0.05)
    for _ in range(2):
        opt.zero_grad()
        model().backward()
        opt.step()
    sd = opt.state_dict()
    resumed = optim.Adam(model.parameters(), lr=0.05)
    resumed.load_state_dict(state_of(sd))
    model.w.grad = None
    model().backward()
    resumed.step()
    w, s = W0.copy(), {}
    for t in (1, 2, 3):
        w = np_adam(0.05)(w, s, t)
    np.testing.assert_allclose(model.w.numpy(), w, rtol=1e-10, err_msg=count_key)
    assert resumed.state_dict()["state"]["step"] == 3


def test_state_dicts_of_oneflow_and_pytorch_form_both_resume():
    # OneFlow's: one int count in state, none per parameter.
    _resumed_adam(lambda sd: {"state": {0: {k: v for k, v in sd["state"][0].items() if k != "step"},
                                        "step": 2},
                              "param_groups": sd["param_groups"]}, "oneflow")
    # PyTorch's: a float32 tensor per parameter, no optimizer count.
    _resumed_adam(lambda sd: {"state": {0: dict(sd["state"][0], step=flow.tensor(2.0))},
                              "param_groups": sd["param_groups"]}, "pytorch")


def test_step_count_carries_from_graph_to_eager():
    model = Quadratic()
    opt = optim.Adam(model.parameters(), lr=0.05)
    g = TrainGraph(model, opt)
    for _ in range(2):
        g(flow.zeros(1, dtype=flow.float64))
    assert opt.state_dict()["state"]["step"] == 2
    opt.zero_grad()
    model().backward()
    opt.step()
    w, s = W0.copy(), {}
    for t in (1, 2, 3):
        w = np_adam(0.05)(w, s, t)
    np.testing.assert_allclose(model.w.numpy(), w, rtol=1e-10)
    assert opt.state_dict()["state"]["step"] == 3


def test_our_state_dict_loads_into_pytorch_and_continues_alike():
    # Both forms side by side: PyTorch reads the per-parameter step (and keeps OneFlow's "step"
    # entry as an unknown key), and its next Adam step equals ours.
    torch = pytest.importorskip("torch")
    model = Quadratic()
    opt = optim.Adam(model.parameters(), lr=0.05)
    for _ in range(2):
        opt.zero_grad()
        model().backward()
        opt.step()
    sd = opt.state_dict()
    to_torch = lambda v: torch.tensor(v.numpy()) if isinstance(v, flow.Tensor) else v  # noqa: E731
    theirs = {"state": {k: ({n: to_torch(t) for n, t in v.items()} if isinstance(v, dict) else v)
                        for k, v in sd["state"].items()},
              "param_groups": sd["param_groups"]}
    w_t = torch.nn.Parameter(torch.tensor(model.w.numpy()))
    opt_t = torch.optim.Adam([w_t], lr=0.05)
    opt_t.load_state_dict(theirs)
    (torch.tensor(C) * w_t * w_t).sum().backward()
    opt_t.step()
    opt.zero_grad()
    model().backward()
    opt.step()
    np.testing.assert_allclose(model.w.numpy(), w_t.detach().numpy(), rtol=1e-10)
    assert float(opt_t.state[w_t]["step"]) == 3.0
