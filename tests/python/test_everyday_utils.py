"""Everyday utilities against PyTorch on the same inputs: RMSprop and Adagrad, the lr schedulers,
nn.utils (gradient clipping, parameter vectors, pad_sequence), nn.init.trunc_normal_,
utils.checkpoint, the dict/list containers, print options, isclose/allclose, finfo/iinfo and the
default dtype; plus their one-line errors. clip_grad_norm_ on global parameters runs in a 2-rank job."""

import copy
import math
import os

import numpy as np
import pytest

import oneflow as flow
import oneflow.nn as nn
import oneflow.optim as optim
from test_comm import DEVICES, DIST, env_with, free_port, launch
from test_optim import _assert_close, _run_side_by_side, _to_flow, _twin_params

torch = pytest.importorskip("torch")

# ---------------------------------------------------------------- RMSprop and Adagrad

# eps=0: OneFlow's RMSprop puts eps inside the square root, PyTorch's outside; without eps the
# two rules are the same (test_optim_oneflow.py checks OneFlow's eps against its formula).
RMSPROP_CASES = [
    dict(lr=0.01, eps=0.0),
    dict(lr=0.01, alpha=0.9, eps=0.0),
    dict(lr=0.01, momentum=0.9, eps=0.0),
    dict(lr=0.01, centered=True, eps=0.0),
    dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1, eps=0.0),
    dict(lr=0.02, weight_decay=0.05, maximize=True, eps=0.0),
]
ADAGRAD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, lr_decay=0.05),
    dict(lr=0.1, weight_decay=0.1),
    dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-3),
    dict(lr=0.05, lr_decay=0.01, weight_decay=0.02, initial_accumulator_value=0.1, maximize=True),
]


@pytest.mark.parametrize("kwargs", RMSPROP_CASES)
def test_rmsprop_matches_torch(kwargs):
    _run_side_by_side(lambda ps: torch.optim.RMSprop(ps, **kwargs), lambda ps: optim.RMSprop(ps, **kwargs),
                      steps=8)


@pytest.mark.parametrize("kwargs", ADAGRAD_CASES)
def test_adagrad_matches_torch(kwargs):
    _run_side_by_side(lambda ps: torch.optim.Adagrad(ps, **kwargs), lambda ps: optim.Adagrad(ps, **kwargs),
                      steps=8)


def test_param_groups_with_their_own_hyper_parameters_and_a_missing_gradient():
    def groups(ps, **extra):
        return [{"params": [ps[0]], **extra}, {"params": [ps[1]]}]

    _run_side_by_side(lambda ps: torch.optim.RMSprop(groups(ps, alpha=0.8, centered=True), lr=0.01),
                      lambda ps: optim.RMSprop(groups(ps, alpha=0.8, centered=True), lr=0.01), skip_grad_of=1)
    _run_side_by_side(lambda ps: torch.optim.Adagrad(groups(ps, lr_decay=0.1), lr=0.1),
                      lambda ps: optim.Adagrad(groups(ps, lr_decay=0.1), lr=0.1), skip_grad_of=0)


def _train_with_loss(runs, steps, seed):
    """Steps each (params, optimizer, library) on the same quadratic loss."""
    rng = np.random.RandomState(seed)
    for _ in range(steps):
        x = rng.randn(5, 4).astype(np.float32)
        y = rng.randn(5, 3).astype(np.float32)
        for params, opt, lib in runs:
            opt.zero_grad()
            w, b = params
            loss = ((lib.tensor(x).matmul(w.t()) + b - lib.tensor(y)) ** 2).mean()
            loss.backward()
            opt.step()


@pytest.mark.parametrize("name,kwargs", [("RMSprop", RMSPROP_CASES[4]), ("Adagrad", ADAGRAD_CASES[4])])
def test_state_dict_round_trips_and_training_continues_as_torch(name, kwargs):
    shapes = ((3, 4), (3,))
    params_t, params_f = _twin_params(shapes, seed=3)
    opt_t = getattr(torch.optim, name)(params_t, **kwargs)
    opt_f = getattr(optim, name)(params_f, **kwargs)
    _train_with_loss([(params_t, opt_t, torch), (params_f, opt_f, flow)], steps=4, seed=0)

    state = opt_f.state_dict()
    assert sorted(state["state"][0]) == sorted(opt_t.state_dict()["state"][0])
    saved = copy.deepcopy(state)
    # A fresh optimizer over copies of the parameters, loaded from the state dict, continues
    # exactly as the original and as torch.
    clones = [nn.Parameter(p.detach().clone()) for p in params_f]
    resumed = getattr(optim, name)(clones, lr=123.0)
    resumed.load_state_dict(saved)
    assert resumed.param_groups[0]["lr"] == kwargs["lr"]
    _train_with_loss([(params_t, opt_t, torch), (params_f, opt_f, flow), (clones, resumed, flow)], steps=4,
                     seed=1)
    for p_t, p_f, p_r in zip(params_t, params_f, clones):
        _assert_close(p_f, p_t, tol=1e-4)
        _assert_close(p_r, p_f, tol=1e-6)
    # the saved dict was not changed by the later steps
    assert saved["state"][0]["step"] == 4


def test_rmsprop_and_adagrad_errors():
    p = [nn.Parameter(flow.ones(2))]
    with pytest.raises(ValueError, match=r"^RMSprop: invalid lr value -0.1 \(expected lr >= 0\)$"):
        optim.RMSprop(p, lr=-0.1)
    with pytest.raises(ValueError, match=r"^RMSprop: invalid alpha value -1 \(expected alpha >= 0\)$"):
        optim.RMSprop(p, alpha=-1)
    with pytest.raises(ValueError, match=r"^RMSprop: invalid momentum value -0.5 \(expected momentum >= 0\)$"):
        optim.RMSprop(p, momentum=-0.5)
    with pytest.raises(ValueError, match=r"^Adagrad: invalid lr_decay value -1 \(expected lr_decay >= 0\)$"):
        optim.Adagrad(p, lr_decay=-1)
    with pytest.raises(ValueError, match=r"^Adagrad: invalid initial_accumulator_value value -0.1 "):
        optim.Adagrad(p, initial_accumulator_value=-0.1)
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'foreach'"):
        optim.RMSprop(p, foreach=True)  # not accepted and ignored


# ---------------------------------------------------------------- lr schedulers

def _sched_pair(make, opt_name="SGD", opt_kwargs=None):
    """The same two-group optimizer in both frameworks, with make(lib_optim, opt) schedulers."""
    opt_kwargs = opt_kwargs or dict(lr=0.1, momentum=0.9)
    p_t = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(3))]
    p_f = [nn.Parameter(flow.zeros(2)), nn.Parameter(flow.zeros(3))]
    opt_t = getattr(torch.optim, opt_name)([{"params": [p_t[0]]}, {"params": [p_t[1]], "lr": 0.05}], **opt_kwargs)
    opt_f = getattr(optim, opt_name)([{"params": [p_f[0]]}, {"params": [p_f[1]], "lr": 0.05}], **opt_kwargs)
    return (opt_t, make(torch.optim, opt_t)), (opt_f, make(optim, opt_f))


def _group_values(opt):
    return [(g["lr"], g.get("momentum"), tuple(g["betas"]) if "betas" in g else None) for g in opt.param_groups]


def _assert_same_values(a, b):
    for (lr_a, m_a, b_a), (lr_b, m_b, b_b) in zip(a, b):
        assert lr_a == pytest.approx(lr_b, rel=1e-9, abs=1e-15)
        assert (m_a is None) == (m_b is None) and (m_a is None or m_a == pytest.approx(m_b, rel=1e-9))
        assert b_a == pytest.approx(b_b, rel=1e-9) if b_a is not None else b_b is None


def _run_scheds(make, steps=30, metrics=None, **kw):
    (opt_t, s_t), (opt_f, s_f) = _sched_pair(make, **kw)
    _assert_same_values(_group_values(opt_f), _group_values(opt_t))
    for i in range(steps):
        opt_t.step()
        opt_f.step()
        if metrics is None:
            s_t.step()
            s_f.step()
        else:
            s_t.step(metrics[i])
            s_f.step(metrics[i])
        _assert_same_values(_group_values(opt_f), _group_values(opt_t))
        assert s_f._last_lr == pytest.approx(s_t._last_lr, rel=1e-9, abs=1e-15)  # torch 1.13 plateau: no get_last_lr
    return (opt_t, s_t), (opt_f, s_f)


SCHEDULERS = {
    "StepLR": lambda o, opt: o.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5),
    "MultiStepLR": lambda o, opt: o.lr_scheduler.MultiStepLR(opt, milestones=[3, 7, 7, 20], gamma=0.3),
    "LambdaLR": lambda o, opt: o.lr_scheduler.LambdaLR(opt, lambda e: 0.95 ** e + 0.01 * (e % 3)),
    "CosineAnnealingLR": lambda o, opt: o.lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=0.001),
    "LinearLR": lambda o, opt: o.lr_scheduler.LinearLR(opt, start_factor=0.25, end_factor=0.9, total_iters=7),
    "LinearLR_default": lambda o, opt: o.lr_scheduler.LinearLR(opt),
    "SequentialLR": lambda o, opt: o.lr_scheduler.SequentialLR(
        opt, [o.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=5),
              o.lr_scheduler.CosineAnnealingLR(opt, T_max=12, eta_min=0.002),
              o.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)], milestones=[5, 17]),
    "OneCycleLR_cos": lambda o, opt: o.lr_scheduler.OneCycleLR(opt, max_lr=[1.0, 0.5], total_steps=30),
    "OneCycleLR_linear": lambda o, opt: o.lr_scheduler.OneCycleLR(
        opt, max_lr=0.8, epochs=5, steps_per_epoch=6, pct_start=0.25, anneal_strategy="linear",
        div_factor=10.0, final_div_factor=100.0, base_momentum=0.8, max_momentum=0.9),
    "OneCycleLR_three_phase": lambda o, opt: o.lr_scheduler.OneCycleLR(
        opt, max_lr=1.0, total_steps=31, three_phase=True, cycle_momentum=False),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_lr_sequence_matches_torch(name):
    _run_scheds(SCHEDULERS[name])


def test_one_cycle_cycles_adam_beta1_like_torch():
    _run_scheds(SCHEDULERS["OneCycleLR_cos"], opt_name="Adam", opt_kwargs=dict(lr=0.1, betas=(0.9, 0.99)))


PLATEAU_METRICS = [5.0, 4.0, 4.0, 3.9999, 4.1, 4.2, 4.3, 3.0, 3.0, 3.0, 3.0, 3.0, 2.999, 2.5, 2.6, 2.7,
                   2.8, 2.9, 3.0, 3.1, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(mode="min", factor=0.5, patience=1, threshold=0.01, cooldown=2, min_lr=[0.02, 0.001]),
    dict(mode="min", factor=0.5, patience=0, threshold=0.05, threshold_mode="abs", min_lr=0.01),
    dict(mode="max", factor=0.2, patience=2, threshold=0.0),
    dict(mode="max", factor=0.7, patience=1, threshold=0.5, threshold_mode="abs", cooldown=1, eps=1e-3),
])
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    metrics = PLATEAU_METRICS
    if kwargs.get("mode") == "max":
        metrics = [-m for m in metrics]
    (_, s_t), (_, s_f) = _run_scheds(lambda o, opt: o.lr_scheduler.ReduceLROnPlateau(opt, **kwargs),
                                     metrics=metrics)
    assert s_f.num_bad_epochs == s_t.num_bad_epochs and s_f.best == s_t.best
    # a 0-dim tensor metric is read as a number
    s_f.step(flow.tensor(0.5))
    s_t.step(torch.tensor(0.5))
    assert s_f.best == s_t.best


@pytest.mark.parametrize("name", ["SequentialLR", "OneCycleLR_three_phase", "LinearLR", "plateau"])
def test_scheduler_state_dict_resumes_the_sequence(name):
    make = SCHEDULERS.get(name) or (
        lambda o, opt: o.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1, cooldown=1))
    metrics = PLATEAU_METRICS if name == "plateau" else None

    def step(opt, sched, i):
        opt.step()
        sched.step() if metrics is None else sched.step(metrics[i])

    (opt_t, s_t), (opt_f, s_f) = _sched_pair(make)
    for i in range(12):
        step(opt_t, s_t, i)
        step(opt_f, s_f, i)
    saved_sched, saved_opt = copy.deepcopy(s_f.state_dict()), copy.deepcopy(opt_f.state_dict())
    # A new optimizer and scheduler, loaded, follow torch's uninterrupted run.
    (_, _), (opt_r, s_r) = _sched_pair(make)
    opt_r.load_state_dict(saved_opt)
    s_r.load_state_dict(saved_sched)
    for i in range(12, 30):
        step(opt_t, s_t, i)
        step(opt_r, s_r, i)
        _assert_same_values(_group_values(opt_r), _group_values(opt_t))


def test_scheduler_errors():
    (_, _), (opt, _) = _sched_pair(lambda o, opt: None)
    S = optim.lr_scheduler
    with pytest.raises(ValueError, match=r"^LinearLR: start_factor must be in \(0, 1\], got 0$"):
        S.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match=r"^SequentialLR: 2 schedulers need 1 milestones, got 2$"):
        S.SequentialLR(opt, [S.LinearLR(opt), S.StepLR(opt, 2)], milestones=[2, 3])
    other = optim.SGD([nn.Parameter(flow.zeros(1))], lr=0.1)
    with pytest.raises(ValueError, match=r"^SequentialLR: scheduler 1 \(StepLR\) belongs to another optimizer"):
        S.SequentialLR(opt, [S.LinearLR(opt), S.StepLR(other, 2)], milestones=[2])
    with pytest.raises(ValueError, match=r"^OneCycleLR: give total_steps, or both epochs and steps_per_epoch "
                                         r"\(got epochs=3, steps_per_epoch=None\)$"):
        S.OneCycleLR(opt, max_lr=1.0, epochs=3)
    with pytest.raises(ValueError, match=r"^OneCycleLR: total_steps must be a positive integer, got 0$"):
        S.OneCycleLR(opt, max_lr=1.0, total_steps=0)
    with pytest.raises(ValueError, match=r"^OneCycleLR: anneal_strategy must be 'cos' or 'linear', got 'exp'$"):
        S.OneCycleLR(opt, max_lr=1.0, total_steps=5, anneal_strategy="exp")
    with pytest.raises(ValueError, match=r"^OneCycleLR: expected 2 values for max_lr, got 3$"):
        S.OneCycleLR(opt, max_lr=[1.0, 2.0, 3.0], total_steps=5)
    adagrad = optim.Adagrad([nn.Parameter(flow.zeros(1))])
    with pytest.raises(ValueError, match=r"^OneCycleLR: cycle_momentum needs an optimizer with momentum or "
                                         r"betas; Adagrad has neither"):
        S.OneCycleLR(adagrad, max_lr=1.0, total_steps=5)
    sched = S.OneCycleLR(opt, max_lr=1.0, total_steps=2)
    sched.step()
    sched.step()
    with pytest.raises(ValueError, match=r"^OneCycleLR: tried to step 4 times, but total_steps is 2$"):
        sched.step()
    with pytest.raises(ValueError, match=r"^ReduceLROnPlateau: factor must be < 1.0, got 1.5$"):
        S.ReduceLROnPlateau(opt, factor=1.5)
    with pytest.raises(ValueError, match=r"^ReduceLROnPlateau: mode must be 'min' or 'max', got 'up'$"):
        S.ReduceLROnPlateau(opt, mode="up")
    with pytest.raises(ValueError, match=r"^ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got 'x'$"):
        S.ReduceLROnPlateau(opt, threshold_mode="x")
    with pytest.raises(ValueError, match=r"^ReduceLROnPlateau: expected 2 min_lrs, got 1$"):
        S.ReduceLROnPlateau(opt, min_lr=[0.1])
    with pytest.raises(TypeError, match=r"^ReduceLROnPlateau: list is not an Optimizer$"):
        S.ReduceLROnPlateau([])


# ---------------------------------------------------------------- nn.utils

def _twin_grads(shapes, seed, scale=1.0):
    params_t, params_f = _twin_params(shapes, seed=seed)
    gen = torch.Generator().manual_seed(seed + 100)
    for p_t, p_f in zip(params_t, params_f):
        g = torch.randn(p_t.shape, generator=gen) * scale
        p_t.grad, p_f.grad = g.clone(), _to_flow(g)
    return params_t, params_f


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf, -math.inf, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e4])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    params_t, params_f = _twin_grads(((3, 4), (4,), (2, 2, 2)), seed=7)
    total_t = torch.nn.utils.clip_grad_norm_(params_t, max_norm, norm_type=norm_type)
    total_f = nn.utils.clip_grad_norm_(params_f, max_norm, norm_type=norm_type)
    assert isinstance(total_f, flow.Tensor) and total_f.ndim == 0
    np.testing.assert_allclose(total_f.numpy(), total_t.numpy(), rtol=1e-5)
    for p_t, p_f in zip(params_t, params_f):
        _assert_close(p_f.grad, p_t.grad, tol=1e-5)
    if max_norm == 1e4:  # not clipped: gradients unchanged
        _, fresh = _twin_grads(((3, 4), (4,), (2, 2, 2)), seed=7)
        for p, q in zip(params_f, fresh):
            _assert_close(p.grad, q.grad, tol=1e-6)


def test_clip_grad_norm_of_order_zero_counts_gradients_with_nonzero_elements():
    p = nn.Parameter(flow.zeros(4))
    q = nn.Parameter(flow.zeros(3))
    p.grad = flow.tensor([0.0, 2.0, 0.0, -1.0])
    q.grad = flow.tensor([3.0, 0.0, 0.0])
    # as OneFlow and PyTorch: the number of gradients with a non-zero element
    assert float(nn.utils.clip_grad_norm_([p, q], 100.0, norm_type=0)) == 2.0


def test_clip_grad_norm_skips_missing_gradients_and_takes_one_tensor():
    params_t, params_f = _twin_grads(((3,), (2,)), seed=1, scale=5.0)
    params_t[1].grad = params_f[1].grad = None
    total_t = torch.nn.utils.clip_grad_norm_(params_t[0], 1.0)
    total_f = nn.utils.clip_grad_norm_(params_f[0], 1.0)
    np.testing.assert_allclose(total_f.numpy(), total_t.numpy(), rtol=1e-6)
    _assert_close(params_f[0].grad, params_t[0].grad)
    assert float(nn.utils.clip_grad_norm_(params_f[1:], 1.0)) == 0.0


def test_clip_grad_norm_non_finite():
    p = nn.Parameter(flow.zeros(3))
    p.grad = flow.tensor([1.0, float("nan"), 2.0])
    with pytest.raises(RuntimeError, match=r"^clip_grad_norm_: the total norm of order 2.0 of the gradients is "
                                           r"non-finite \(nan\), so it cannot be clipped; pass "
                                           r"error_if_nonfinite=False to scale the gradients by it anyway$"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(np.isnan(p.grad.numpy()), [False, True, False])  # untouched
    # Without the check the gradients are scaled by the non-finite norm, as in PyTorch.
    pt = torch.nn.Parameter(torch.zeros(3))
    pt.grad = torch.tensor([1.0, float("inf"), 2.0])
    p.grad = flow.tensor([1.0, float("inf"), 2.0])
    total_t = torch.nn.utils.clip_grad_norm_([pt], 1.0)
    total_f = nn.utils.clip_grad_norm_([p], 1.0)
    assert float(total_f) == float(total_t) == math.inf
    np.testing.assert_array_equal(p.grad.numpy(), pt.grad.numpy())


def test_clip_grad_value_matches_torch():
    params_t, params_f = _twin_grads(((3, 4), (5,)), seed=2, scale=2.0)
    torch.nn.utils.clip_grad_value_(params_t, 0.7)
    assert nn.utils.clip_grad_value_(params_f, 0.7) is None
    for p_t, p_f in zip(params_t, params_f):
        _assert_close(p_f.grad, p_t.grad, tol=0)
    assert max(float(p.grad.abs().max()) for p in params_f) == pytest.approx(0.7)
    with pytest.raises(ValueError, match=r"^clip_grad_value_: clip_value must be >= 0, got -1.0$"):
        nn.utils.clip_grad_value_(params_f, -1)


def test_parameters_to_vector_and_back_match_torch():
    params_t, params_f = _twin_params(((3, 4), (4,), (2, 1, 3)), seed=4)
    vec_t = torch.nn.utils.parameters_to_vector(params_t)
    vec_f = nn.utils.parameters_to_vector(params_f)
    _assert_close(vec_f, vec_t, tol=0)
    # the vector is differentiable with respect to the parameters
    (vec_f * flow.arange(vec_f.numel(), dtype=flow.float32)).sum().backward()
    offset = 0
    for p in params_f:
        n = p.numel()
        np.testing.assert_array_equal(p.grad.numpy().ravel(), np.arange(offset, offset + n))
        offset += n
    new = torch.linspace(-1, 1, vec_t.numel())
    torch.nn.utils.vector_to_parameters(new, params_t)
    nn.utils.vector_to_parameters(_to_flow(new), params_f)
    for p_t, p_f in zip(params_t, params_f):
        _assert_close(p_f, p_t, tol=0)
        assert isinstance(p_f, nn.Parameter) and p_f.requires_grad
    with pytest.raises(ValueError, match=r"^vector_to_parameters: vec has 5 elements but the parameters have "
                                         r"22$"):
        nn.utils.vector_to_parameters(flow.zeros(5), params_f)
    with pytest.raises(TypeError, match=r"^vector_to_parameters: expected a Tensor as vec, got list$"):
        nn.utils.vector_to_parameters([1.0], params_f)
    with pytest.raises(TypeError, match=r"^parameters_to_vector: expected an iterable of Tensors, got a "
                                        r"single Tensor$"):
        nn.utils.parameters_to_vector(params_f[0])


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_value", [0.0, -1.5])
def test_pad_sequence_matches_torch_with_gradients(batch_first, padding_value):
    gen = torch.Generator().manual_seed(0)
    seqs_t = [torch.randn(n, 3, 2, generator=gen, requires_grad=True) for n in (4, 1, 6, 6)]
    seqs_f = [_to_flow(s).requires_grad_(True) for s in seqs_t]
    out_t = torch.nn.utils.rnn.pad_sequence(seqs_t, batch_first=batch_first, padding_value=padding_value)
    out_f = nn.utils.rnn.pad_sequence(seqs_f, batch_first=batch_first, padding_value=padding_value)
    assert tuple(out_f.shape) == tuple(out_t.shape)
    _assert_close(out_f, out_t, tol=0)
    w = torch.randn(out_t.shape, generator=gen)
    (out_t * w).sum().backward()
    (out_f * _to_flow(w)).sum().backward()
    for s_t, s_f in zip(seqs_t, seqs_f):
        _assert_close(s_f.grad, s_t.grad, tol=1e-6)


def test_pad_sequence_of_ints_and_errors():
    out = nn.utils.rnn.pad_sequence([flow.tensor([1, 2, 3]), flow.tensor([4])], batch_first=True, padding_value=9)
    assert out.dtype == flow.int64 and out.tolist() == [[1, 2, 3], [4, 9, 9]]
    with pytest.raises(ValueError, match=r"^pad_sequence: got an empty list of sequences$"):
        nn.utils.rnn.pad_sequence([])
    with pytest.raises(ValueError, match=r"^pad_sequence: sequence 1 has trailing shape \(3,\) but sequence 0 "
                                         r"has \(2,\); all must match$"):
        nn.utils.rnn.pad_sequence([flow.zeros(2, 2), flow.zeros(1, 3)])


# ---------------------------------------------------------------- trunc_normal_

def _trunc_normal_moments(mean, std, a, b):
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: (1 + math.erf(x / math.sqrt(2))) / 2  # noqa: E731
    z = cdf(beta) - cdf(alpha)
    m = mean + std * (pdf(alpha) - pdf(beta)) / z
    var = std ** 2 * (1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z - ((pdf(alpha) - pdf(beta)) / z) ** 2)
    return m, var, lambda x: (cdf((x - mean) / std) - cdf(alpha)) / z


@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (1.0, 2.0, -1.0, 4.0), (0.0, 0.02, -0.04, 0.04),
                                          (0.0, 1.0, 1.5, 3.0), (-3.0, 0.5, -10.0, -2.8)])
def test_trunc_normal_distribution(mean, std, a, b):
    flow.manual_seed(1234)
    n = 200_000
    t = nn.init.trunc_normal_(flow.empty(400, n // 400), mean, std, a, b)
    x = np.sort(t.numpy().ravel().astype(np.float64))
    assert x[0] >= a and x[-1] <= b
    m, var, cdf = _trunc_normal_moments(mean, std, a, b)
    sd = math.sqrt(var)
    assert abs(x.mean() - m) < 5 * sd / math.sqrt(n)
    assert abs(x.var() - var) < 0.02 * var
    # Kolmogorov-Smirnov distance to the truncated normal's CDF (1.95 / sqrt(n) is p ~ 0.001)
    theo = np.array([cdf(v) for v in x[:: 50]])
    emp = (np.arange(n)[:: 50] + 1) / n
    assert np.max(np.abs(emp - theo)) < 1.95 / math.sqrt(n) + 1e-4
    # the ends where the density is not negligible are reached (not a narrower range)
    if a > mean - 3 * std:
        assert x[0] < a + 0.01 * (b - a)
    if b < mean + 3 * std:
        assert x[-1] > b - 0.01 * (b - a)


def test_trunc_normal_is_seeded_in_place_and_checks_its_arguments():
    w = nn.Parameter(flow.empty(3, 5))
    flow.manual_seed(3)
    assert nn.init.trunc_normal_(w, std=0.02) is w
    flow.manual_seed(3)
    again = nn.init.trunc_normal_(flow.empty(3, 5), std=0.02)
    np.testing.assert_array_equal(w.detach().numpy(), again.numpy())
    assert w.requires_grad and w.grad_fn is None
    d = nn.init.trunc_normal_(flow.empty(1000, dtype=flow.float64), 0.5, 0.1, 0.4, 0.6)
    assert d.dtype == flow.float64 and 0.4 <= float(d.min()) and float(d.max()) <= 0.6
    with pytest.raises(ValueError, match=r"^trunc_normal_: std must be positive, got 0.0$"):
        nn.init.trunc_normal_(flow.empty(2), std=0.0)
    with pytest.raises(ValueError, match=r"^trunc_normal_: the bounds need a < b, got a=1.0, b=-1.0$"):
        nn.init.trunc_normal_(flow.empty(2), a=1.0, b=-1.0)
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        nn.init.trunc_normal_(flow.empty(2), mean=10.0, std=1.0, a=-2.0, b=2.0)


# ---------------------------------------------------------------- utils.checkpoint

def _mlp(nn_, dropout=0.0):
    return nn_.Sequential(nn_.Linear(4, 8), nn_.GELU(), nn_.Dropout(dropout), nn_.Linear(8, 8), nn_.Tanh(),
                          nn_.Linear(8, 3))


def _twin_mlps(dropout=0.0):
    torch.manual_seed(0)
    m_t, m_f = _mlp(torch.nn, dropout), _mlp(nn, dropout)
    m_f.load_state_dict({k: _to_flow(v) for k, v in m_t.state_dict().items()})
    return m_t, m_f


@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_checkpoint_matches_torch_values_and_gradients(input_requires_grad):
    import torch.utils.checkpoint as tc
    from oneflow.utils.checkpoint import checkpoint, checkpoint_sequential

    m_t, m_f = _twin_mlps()
    x = np.random.RandomState(0).randn(5, 4).astype(np.float32)
    runs = [  # (oneflow, torch); torch's reentrant mode needs an input that requires grad
        (lambda m, a: checkpoint(m, a), lambda m, a: tc.checkpoint(m, a, use_reentrant=False)),
        (lambda m, a: checkpoint(lambda u, s: m(u) * s, a, 2.0, use_reentrant=True),
         lambda m, a: tc.checkpoint(lambda u, s: m(u) * s, a, 2.0, use_reentrant=False)),
        # torch 1.13's checkpoint_sequential is reentrant only: compare with the plain call
        (lambda m, a: flow.utils.checkpoint.checkpoint_sequential(m, 3, a), lambda m, a: m(a)),
        (lambda m, a: checkpoint_sequential(list(m), 2, a), lambda m, a: m(a)),
    ]
    for run_f, run_t in runs:
        m_t.zero_grad(), m_f.zero_grad()
        x_t = torch.tensor(x, requires_grad=input_requires_grad)
        x_f = flow.tensor(x, requires_grad=input_requires_grad)
        y_t, y_f = run_t(m_t, x_t), run_f(m_f, x_f)
        _assert_close(y_f, y_t)
        assert y_f.requires_grad
        (y_t ** 2).sum().backward()
        (y_f ** 2).sum().backward()
        if input_requires_grad:
            _assert_close(x_f.grad, x_t.grad)
        for (name, p_t), p_f in zip(m_t.named_parameters(), m_f.parameters()):
            np.testing.assert_allclose(p_f.grad.numpy(), p_t.grad.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


def test_checkpoint_replays_dropout_and_leaves_the_random_stream_alone():
    from oneflow.utils.checkpoint import checkpoint

    _, m = _twin_mlps(dropout=0.5)
    x = np.random.RandomState(1).randn(6, 4).astype(np.float32)

    def run(use_checkpoint):
        m.zero_grad()
        a = flow.tensor(x, requires_grad=True)
        flow.manual_seed(3)
        y = checkpoint(m, a) if use_checkpoint else m(a)
        y.sum().backward()
        return y.detach().numpy(), a.grad.numpy(), [p.grad.numpy() for p in m.parameters()], flow.rand(3).numpy()

    got, want = run(True), run(False)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])  # backward recomputed with the forward's mask
    for a, b in zip(got[2], want[2]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[3], want[3])  # the recomputation restored the stream
    with flow.no_grad():  # no graph: a plain call
        assert not checkpoint(m, flow.tensor(x)).requires_grad


def test_checkpoint_errors():
    from oneflow.utils.checkpoint import checkpoint, checkpoint_sequential

    x = flow.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"^checkpoint: function must be callable, got int$"):
        checkpoint(3, x)
    with pytest.raises(TypeError, match=r"^checkpoint: the function must return a tensor or a tuple of tensors, "
                                        r"got \['Tensor', 'int'\]$"):
        checkpoint(lambda t: (t * 2, 1), x)
    with pytest.raises(ValueError, match=r"^checkpoint_sequential: segments must be an int in \[1, 2\] \(the number "
                                         r"of functions\), got 3$"):
        checkpoint_sequential([nn.Identity(), nn.Identity()], 3, x)
    with pytest.raises(ValueError, match=r"^checkpoint_sequential: unexpected keyword arguments: foo$"):
        checkpoint_sequential([nn.Identity()], 1, x, foo=1)


# ---------------------------------------------------------------- containers

class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "box": nn.Linear(4, 2)})
        self.scales = nn.ParameterList([nn.Parameter(flow.ones(3)), nn.Parameter(flow.ones(2))])
        self.extra = nn.ParameterDict({"alpha": nn.Parameter(flow.ones(1)), "beta": nn.Parameter(flow.ones(2))})


class _TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = torch.nn.ModuleDict({"cls": torch.nn.Linear(4, 3), "box": torch.nn.Linear(4, 2)})
        self.scales = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))])
        self.extra = torch.nn.ParameterDict({"alpha": torch.nn.Parameter(torch.ones(1)),
                                             "beta": torch.nn.Parameter(torch.ones(2))})


def test_containers_register_like_torch():
    net, ref = _Net(), _TorchNet()
    assert [n for n, _ in net.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert list(net.state_dict().keys()) == list(ref.state_dict().keys())
    assert [tuple(p.shape) for p in net.parameters()] == [tuple(p.shape) for p in ref.parameters()]
    # state dicts load both ways
    net.load_state_dict({k: _to_flow(v) for k, v in ref.state_dict().items()})
    for (_, a), (_, b) in zip(net.named_parameters(), ref.named_parameters()):
        _assert_close(a, b, tol=0)
    # to() keeps the Parameter objects (optimizers hold them) and converts their data
    scales = list(net.scales)
    net.to(flow.float64)
    assert all(a is b for a, b in zip(net.scales, scales))
    assert {p.dtype for p in net.parameters()} == {flow.float64}
    assert net.extra["alpha"].dtype == flow.float64
    # an optimizer over parameters() moves the list and dict members
    opt = optim.SGD(net.parameters(), lr=1.0)
    (net.scales[0].sum() + net.extra["beta"].sum() * 2).backward()
    opt.step()
    assert net.scales[0].tolist() == [0.0, 0.0, 0.0] and net.extra["beta"].tolist() == [-1.0, -1.0]


def test_containers_follow_to_global():
    P1 = flow.placement("cpu", ranks=[0])
    net = _Net()
    alpha = net.extra["alpha"]
    net.to_global(placement=P1, sbp=flow.sbp.broadcast)
    assert net.extra["alpha"] is alpha and alpha.is_global
    assert all(p.is_global for p in net.parameters())
    assert net.scales[1].placement == P1


def test_module_dict_api():
    d = nn.ModuleDict([("a", nn.ReLU()), ("b", nn.Tanh())])
    assert list(d.keys()) == ["a", "b"] and len(d) == 2 and "a" in d and list(d) == ["a", "b"]
    d["c"] = nn.Identity()
    d.update({"a": nn.Sigmoid()})
    assert [type(m).__name__ for m in d.values()] == ["Sigmoid", "Tanh", "Identity"]
    assert type(d.pop("b")).__name__ == "Tanh" and list(d) == ["a", "c"]
    del d["a"]
    assert [k for k, _ in d.items()] == ["c"] and [n for n, _ in d.named_children()] == ["c"]
    d.clear()
    assert len(d) == 0
    with pytest.raises(KeyError):
        d["missing"]
    with pytest.raises(TypeError, match=r"^ModuleDict.update: expected a mapping or an iterable of key/value "
                                        r"pairs, got int$"):
        d.update(3)
    with pytest.raises(ValueError, match=r"^ModuleDict.update: element #0 has length 3; 2 is required$"):
        d.update([("a", nn.ReLU(), 1)])
    with pytest.raises(TypeError, match=r"^int is not a Module subclass$"):
        d["x"] = 3
    with pytest.raises(KeyError, match=r"attribute 'keys' already exists"):
        d["keys"] = nn.ReLU()


def test_parameter_list_api():
    pl = nn.ParameterList([flow.zeros(2)])
    assert isinstance(pl[0], nn.Parameter) and pl[0].requires_grad  # tensors become Parameters
    pl.append(nn.Parameter(flow.ones(3)))
    pl += [flow.ones(1)]
    pl.extend([flow.ones(4)])
    assert len(pl) == 4 and [tuple(p.shape) for p in pl] == [(2,), (3,), (1,), (4,)]
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2", "3"]
    assert pl[-1] is pl[3]
    assert [tuple(p.shape) for p in pl[1:3]] == [(3,), (1,)] and isinstance(pl[1:3], nn.ParameterList)
    new = nn.Parameter(flow.full((5,), 2.0))
    pl[0] = new
    assert pl[0] is new and dict(pl.named_parameters())["0"] is new
    for shapes in (((2, 3),), ((2, 3), (1,))):
        theirs = repr(torch.nn.ParameterList([torch.ones(*sh) for sh in shapes])).replace("torch.", "oneflow.")
        assert repr(nn.ParameterList([flow.ones(*sh) for sh in shapes])) == theirs
    with pytest.raises(IndexError, match=r"^index 4 is out of range$"):
        pl[4]
    with pytest.raises(TypeError, match=r"^ParameterList.extend: expected an iterable of parameters, got "
                                        r"Tensor$"):
        pl.extend(flow.ones(2))
    with pytest.raises(RuntimeError, match=r"^ParameterList should not be called$"):
        pl(1)


def test_parameter_dict_api():
    pd = nn.ParameterDict({"w": flow.zeros(2)})
    pd["b"] = nn.Parameter(flow.ones(1))
    pd.update([("c", flow.ones(3))])
    assert list(pd) == ["w", "b", "c"] and isinstance(pd["c"], nn.Parameter)
    assert [n for n, _ in pd.named_parameters()] == ["w", "b", "c"]
    assert pd.get("nope") is None and "b" in pd and len(pd) == 3
    assert list(reversed(pd)) == ["c", "b", "w"]
    assert pd.setdefault("d", flow.zeros(1)) is pd["d"]
    key, value = pd.popitem()
    assert key == "d" and tuple(value.shape) == (1,) and "d" not in dict(pd.named_parameters())
    assert tuple(pd.pop("w").shape) == (2,) and list(pd.keys()) == ["b", "c"]
    merged = pd | {"z": flow.ones(2)}
    assert list(merged) == ["b", "c", "z"] and list(pd) == ["b", "c"]
    assert merged["b"] is pd["b"]  # copy() shares the parameters, as in PyTorch
    del pd["b"]
    assert [n for n, _ in pd.named_parameters()] == ["c"]
    with pytest.raises(TypeError, match=r"^ParameterDict: keys must be strings, got int$"):
        pd[1] = flow.ones(1)
    with pytest.raises(KeyError, match=r'contain "\.", got "a\.b"'):
        pd["a.b"] = flow.ones(1)
    with pytest.raises(KeyError):
        pd["missing"]


# ---------------------------------------------------------------- print options

@pytest.fixture
def restore_printoptions():
    yield
    flow.set_printoptions(profile="default", sci_mode=None)
    torch.set_printoptions(profile="default", sci_mode=None)


def _body(text):
    """The tensor(...) text without the suffixes (ours always names the dtype)."""
    text = text.split(", dtype=")[0].split(",\n       dtype=")[0]
    return text if text.endswith(")") else text + ")"


@pytest.mark.parametrize("options", [
    dict(precision=2),
    dict(precision=7),
    dict(threshold=5),
    dict(threshold=5, edgeitems=1),
    dict(edgeitems=5, threshold=20),
    dict(linewidth=40),
    dict(sci_mode=True),
    dict(sci_mode=False),
    dict(profile="short"),
    dict(profile="full"),
    dict(precision=1, sci_mode=True, linewidth=50),
])
def test_set_printoptions_matches_torch(options, restore_printoptions):
    flow.set_printoptions(**options)
    torch.set_printoptions(**options)
    rng = np.random.RandomState(0)
    cases = [rng.randn(4, 7) * 100, rng.randn(30), rng.rand(3, 3) * 1e-5, np.arange(1200.0).reshape(40, 30),
             np.array([1.0, 1e9, 3.0]), np.array([0.5, -2.25]), rng.randn(2, 3, 8)]
    for data in cases:
        ours = _body(repr(flow.tensor(data.astype(np.float32))))
        theirs = _body(repr(torch.tensor(data.astype(np.float32))))
        assert ours == theirs, (options, data.shape)


def test_set_printoptions_errors(restore_printoptions):
    with pytest.raises(ValueError, match=r"^set_printoptions: profile must be one of \['default', 'full', "
                                         r"'short'\], got 'long'$"):
        flow.set_printoptions(profile="long")
    with pytest.raises(ValueError, match=r"^set_printoptions: precision must be a non-negative int, got 2.5$"):
        flow.set_printoptions(precision=2.5)
    with pytest.raises(ValueError, match=r"^set_printoptions: sci_mode must be True, False or None, got 'on'$"):
        flow.set_printoptions(sci_mode="on")


# ---------------------------------------------------------------- isclose / allclose

@pytest.mark.parametrize("kwargs", [dict(), dict(rtol=1e-3), dict(atol=0.1), dict(rtol=0, atol=0),
                                    dict(equal_nan=True), dict(rtol=0.5, atol=1e-3, equal_nan=True)])
def test_isclose_and_allclose_match_torch(kwargs):
    inf, nan = math.inf, math.nan
    a = np.array([1.0, 1.0001, 1.1, 0.0, 1e-9, inf, -inf, inf, nan, nan, 2.0, 100.0], dtype=np.float32)
    b = np.array([1.0, 1.0, 1.0, 1e-9, 0.0, inf, inf, 1e38, nan, 1.0, 2.05, 103.0], dtype=np.float32)
    for x, y in ((a, b), (b, a), (a[:2], a[:2]), (a.reshape(3, 4), b[:4])):
        ours = flow.isclose(flow.tensor(x), flow.tensor(y), **kwargs)
        theirs = torch.isclose(torch.tensor(x), torch.tensor(y), **kwargs)
        assert ours.dtype == flow.bool
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        assert flow.tensor(x).isclose(flow.tensor(y), **kwargs).tolist() == theirs.tolist()
        assert flow.allclose(flow.tensor(x), flow.tensor(y), **kwargs) == torch.allclose(
            torch.tensor(x), torch.tensor(y), **kwargs)
        assert flow.tensor(x).allclose(flow.tensor(y), **kwargs) == torch.allclose(
            torch.tensor(x), torch.tensor(y), **kwargs)
    ints = (np.array([100, 101, 5]), np.array([100, 100, 7]))
    assert flow.isclose(*map(flow.tensor, ints), rtol=0.01).tolist() == torch.isclose(
        *map(torch.tensor, ints), rtol=0.01).tolist()


def test_isclose_errors():
    with pytest.raises(TypeError, match=r"^isclose: input and other must have the same dtype, got float32 and "
                                        r"float64$"):
        flow.isclose(flow.ones(2), flow.ones(2, dtype=flow.float64))
    with pytest.raises(ValueError, match=r"^isclose: rtol must be >= 0, got -1$"):
        flow.allclose(flow.ones(2), flow.ones(2), rtol=-1)
    with pytest.raises(TypeError, match=r"^isclose: other must be a Tensor, got list$"):
        flow.isclose(flow.ones(2), [1.0, 1.0])


# ---------------------------------------------------------------- finfo / iinfo

@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_torch(name):
    ours, theirs = flow.finfo(getattr(flow, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name", ["uint8", "int8", "int32", "int64"])
def test_iinfo_matches_torch(name):
    ours, theirs = flow.iinfo(getattr(flow, name)), torch.iinfo(getattr(torch, name))
    for attr in ("bits", "max", "min", "dtype"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert repr(ours) == repr(theirs)


def test_finfo_iinfo_errors_and_default():
    assert flow.finfo().dtype == "float32"
    with pytest.raises(TypeError, match=r"^finfo: oneflow.int32 is not a floating point dtype \(use "
                                        r"oneflow.iinfo\)$"):
        flow.finfo(flow.int32)
    with pytest.raises(TypeError, match=r"^iinfo: oneflow.float32 is not an integer dtype"):
        flow.iinfo(flow.float32)
    with pytest.raises(TypeError, match=r"^iinfo: oneflow.bool is not an integer dtype"):
        flow.iinfo(flow.bool)
    with pytest.raises(TypeError, match=r"^finfo: expected a oneflow.dtype, got str$"):
        flow.finfo("float32")


# ---------------------------------------------------------------- default dtype

@pytest.fixture
def float64_default():
    flow.set_default_dtype(flow.float64)
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        flow.set_default_dtype(flow.float32)
        torch.set_default_dtype(torch.float32)


CREATIONS = [
    ("tensor of a float", lambda lib: lib.tensor(0.1)),
    ("tensor of a nested list", lambda lib: lib.tensor([[1, 2.5], [3, 4]])),
    ("tensor of ints", lambda lib: lib.tensor([1, 2])),
    ("tensor of bools", lambda lib: lib.tensor([True])),
    ("empty list", lambda lib: lib.tensor([])),
    ("float32 array", lambda lib: lib.tensor(np.ones(2, dtype=np.float32))),
    ("zeros", lambda lib: lib.zeros(2, 3)),
    ("ones", lambda lib: lib.ones(2)),
    ("empty", lambda lib: lib.empty(2)),
    ("full of a float", lambda lib: lib.full((2,), 1.5)),
    ("full of an int", lambda lib: lib.full((2,), 3)),
    ("rand", lambda lib: lib.rand(2)),
    ("randn", lambda lib: lib.randn(2, 2)),
    ("arange of floats", lambda lib: lib.arange(0, 1.0, 0.25)),
    ("arange of ints", lambda lib: lib.arange(5)),
    ("eye", lambda lib: lib.eye(2)),
    ("Tensor(sizes)", lambda lib: lib.Tensor(2, 3)),
    ("zeros_like of float32", lambda lib: lib.zeros_like(lib.ones(2, dtype=lib.float32))),
    ("explicit float32", lambda lib: lib.ones(2, dtype=lib.float32)),
    ("Linear weight", lambda lib: lib.nn.Linear(2, 2).weight),
]


@pytest.mark.parametrize("name,make", CREATIONS, ids=[c[0] for c in CREATIONS])
def test_creation_follows_the_default_dtype_like_torch(name, make, float64_default):
    assert flow.get_default_dtype() == flow.float64
    ours, theirs = make(flow), make(torch)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]


def test_default_dtype_float64_keeps_every_digit_and_restores(float64_default):
    assert flow.tensor(0.1).item() == 0.1
    assert flow.tensor([1 / 3]).tolist() == [1 / 3]
    np.testing.assert_array_equal(flow.arange(0, 1, 0.1).numpy(), torch.arange(0, 1, 0.1).numpy())
    flow.set_default_dtype(flow.float32)
    assert flow.tensor(0.1).dtype == flow.float32 and flow.zeros(1).dtype == flow.float32


def test_set_default_dtype_errors():
    with pytest.raises(TypeError, match=r"^set_default_dtype: only floating-point dtypes can be the default, "
                                        r"got oneflow.int32$"):
        flow.set_default_dtype(flow.int32)
    with pytest.raises(NotImplementedError, match=r"^set_default_dtype: oneflow.float16 as the default dtype "
                                                  r"is not supported"):
        flow.set_default_dtype(flow.float16)
    with pytest.raises(TypeError, match=r"^set_default_dtype: expected a oneflow.dtype, got str$"):
        flow.set_default_dtype("float64")
    assert flow.get_default_dtype() == flow.float32


# ---------------------------------------------------------------- global parameters, 2 ranks

@pytest.mark.parametrize("device", DEVICES)
def test_clip_grad_norm_and_optimizers_on_global_parameters_equal_one_process(device):
    r = launch("--nproc_per_node", 2, "--master_port", free_port(), os.path.join(DIST, "clip_grad_global.py"),
               env=env_with(), timeout=180, device=device)
    assert r.returncode == 0, r.stdout + r.stderr
    for case in ("broadcast_and_split_2", "broadcast_and_split_inf", "broadcast_and_split_3", "model",
                 "rmsprop_global", "adagrad_global"):
        assert r.stdout.count(f"{case} ok") == 2, r.stdout + r.stderr
