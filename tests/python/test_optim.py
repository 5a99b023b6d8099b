"""oneflow.optim: SGD, Adam, AdamW and the lr schedulers against torch.optim, step by step,
plus param groups, state dicts and argument errors."""

import math

import pytest

import oneflow as flow
import oneflow.nn as nn
import oneflow.optim as optim


def _torch():
    return pytest.importorskip("torch")


def _to_flow(t):
    dtype = getattr(flow, str(t.dtype).rsplit(".", 1)[-1])
    return flow.tensor(t.detach().tolist(), dtype=dtype)


def _assert_close(actual, expected, tol=1e-5):
    """actual (a flow tensor) against expected (a torch or flow tensor)."""
    import numpy as np

    np.testing.assert_allclose(actual.detach().numpy(), expected.detach().numpy(), rtol=tol, atol=tol)


def _twin_params(shapes, seed=0):
    """The same random values as torch and as flow Parameters."""
    torch = _torch()
    gen = torch.Generator().manual_seed(seed)
    torch_params = [torch.nn.Parameter(torch.randn(*s, generator=gen)) for s in shapes]
    flow_params = [nn.Parameter(_to_flow(p)) for p in torch_params]
    return torch_params, flow_params


def _run_side_by_side(make_torch_opt, make_flow_opt, steps=6, shapes=((3, 4), (4,)), skip_grad_of=None):
    """Feeds identical gradients to both optimizers and compares parameters after each step."""
    torch = _torch()
    torch_params, flow_params = _twin_params(shapes)
    opt_t = make_torch_opt(torch_params)
    opt_f = make_flow_opt(flow_params)
    gen = torch.Generator().manual_seed(1)
    for step in range(steps):
        for i, (p_t, p_f) in enumerate(zip(torch_params, flow_params)):
            if i == skip_grad_of:
                p_t.grad, p_f.grad = None, None
                continue
            g = torch.randn(p_t.shape, generator=gen)
            p_t.grad = g.clone()
            p_f.grad = _to_flow(g)
        opt_t.step()
        opt_f.step()
        for p_t, p_f in zip(torch_params, flow_params):
            _assert_close(p_f, p_t)
    return torch_params, flow_params, opt_t, opt_f


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(lr=0.1),
        dict(lr=0.1, momentum=0.9),
        dict(lr=0.1, momentum=0.9, nesterov=True),
        # With dampening OneFlow's first step differs from PyTorch's (its buffer starts at zero):
        # test_optim_oneflow.py checks that case against OneFlow's formula.
        dict(lr=0.1, momentum=0.8, weight_decay=0.01),
        dict(lr=0.1, weight_decay=0.1),
        dict(lr=0.1, momentum=0.9, maximize=True),
    ],
)
def test_sgd_matches_torch(kwargs):
    torch = _torch()
    _run_side_by_side(lambda ps: torch.optim.SGD(ps, **kwargs), lambda ps: optim.SGD(ps, **kwargs))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6),
        dict(lr=0.01, weight_decay=0.1),
        dict(lr=0.01, amsgrad=True),
        dict(lr=0.01, weight_decay=0.05, amsgrad=True),
        dict(lr=0.01, maximize=True),
    ],
)
def test_adam_matches_torch(kwargs):
    torch = _torch()
    _run_side_by_side(lambda ps: torch.optim.Adam(ps, **kwargs), lambda ps: optim.Adam(ps, **kwargs), steps=8)


# weight_decay given: OneFlow's default is 0, PyTorch's 1e-2.
@pytest.mark.parametrize("kwargs", [dict(weight_decay=1e-2), dict(lr=0.01, weight_decay=0.1),
                                    dict(lr=0.01, amsgrad=True, weight_decay=1e-2)])
def test_adamw_matches_torch(kwargs):
    torch = _torch()
    _run_side_by_side(lambda ps: torch.optim.AdamW(ps, **kwargs), lambda ps: optim.AdamW(ps, **kwargs), steps=8)


def test_adamw_default_weight_decay_is_oneflows():
    opt = optim.AdamW([nn.Parameter(flow.ones(2))])
    assert opt.param_groups[0]["weight_decay"] == 0
    assert optim.Adam([nn.Parameter(flow.ones(2))]).param_groups[0]["weight_decay"] == 0


def test_parameters_without_grad_are_skipped():
    torch = _torch()
    _, flow_params, _, opt_f = _run_side_by_side(
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
        skip_grad_of=1,
    )
    assert flow_params[1] not in opt_f.state


def test_param_groups_with_their_own_lr():
    torch = _torch()
    _run_side_by_side(
        lambda ps: torch.optim.SGD([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.01}], lr=0.1, momentum=0.5),
        lambda ps: optim.SGD([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.01}], lr=0.1, momentum=0.5),
    )


def test_training_loop_with_backward_and_closure():
    torch = _torch()
    torch.manual_seed(0)
    lin_t = torch.nn.Linear(3, 2)
    lin_f = nn.Linear(3, 2)
    lin_f.load_state_dict({k: _to_flow(v) for k, v in lin_t.state_dict().items()})
    opt_t = torch.optim.SGD(lin_t.parameters(), lr=0.1, momentum=0.9)
    opt_f = optim.SGD(lin_f.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(8, 3)
    y = torch.randn(8, 2)
    x_f, y_f = _to_flow(x), _to_flow(y)

    def closure_t():
        opt_t.zero_grad()
        loss = torch.nn.functional.mse_loss(lin_t(x), y)
        loss.backward()
        return loss

    def closure_f():
        opt_f.zero_grad()
        loss = nn.functional.mse_loss(lin_f(x_f), y_f)
        loss.backward()
        return loss

    for _ in range(5):
        loss_t = opt_t.step(closure_t)
        loss_f = opt_f.step(closure_f)
        assert loss_f.item() == pytest.approx(loss_t.item(), rel=1e-5)
    _assert_close(lin_f.weight, lin_t.weight)
    _assert_close(lin_f.bias, lin_t.bias)
    # step() ran its update under no_grad but left grad mode as it found it.
    assert flow.is_grad_enabled()


def test_step_records_no_graph():
    p = nn.Parameter(flow.ones(3))
    opt = optim.Adam([p], lr=0.1)
    p.grad = flow.ones(3)
    opt.step()
    assert p.is_leaf and p.grad_fn is None and p.requires_grad


def test_zero_grad():
    p = nn.Parameter(flow.ones(3))
    opt = optim.SGD([p], lr=0.1)
    p.grad = flow.ones(3)
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


def test_state_dict_round_trip_resumes_identically():
    torch = _torch()
    torch_params, flow_params = _twin_params([(3, 4), (4,)])
    gen = torch.Generator().manual_seed(2)
    grads = [[torch.randn(p.shape, generator=gen) for p in torch_params] for _ in range(6)]

    def run(params, opt, grad_steps):
        for step_grads in grad_steps:
            for p, g in zip(params, step_grads):
                p.grad = _to_flow(g)
            opt.step()

    # Uninterrupted run.
    opt = optim.Adam(flow_params, lr=0.01, amsgrad=True)
    run(flow_params, opt, grads)
    expected = [p.detach().clone() for p in flow_params]

    # Three steps, a state dict, a fresh optimizer on fresh parameters, three more steps.
    _, params_b = _twin_params([(3, 4), (4,)])
    opt_b = optim.Adam(params_b, lr=0.01, amsgrad=True)
    run(params_b, opt_b, grads[:3])
    sd = opt_b.state_dict()
    assert sorted(k for k in sd["state"] if k != "step") == [0, 1]
    assert sd["state"]["step"] == 3  # OneFlow's count: one per optimizer
    assert sd["param_groups"][0]["params"] == [0, 1]
    assert sd["state"][0]["step"] == 3
    params_c = [nn.Parameter(p.detach().clone()) for p in params_b]
    opt_c = optim.Adam(params_c, lr=0.5)
    opt_c.load_state_dict(sd)
    assert opt_c.param_groups[0]["lr"] == 0.01
    assert opt_c.param_groups[0]["params"][0] is params_c[0]
    run(params_c, opt_c, grads[3:])
    for p, e in zip(params_c, expected):
        _assert_close(p, e)


def test_sgd_state_dict_holds_momentum_buffers():
    p = nn.Parameter(flow.ones(2))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = flow.ones(2)
    opt.step()
    sd = opt.state_dict()
    assert sd["state"][0]["momentum_buffer"].tolist() == [1.0, 1.0]
    assert sd["param_groups"][0]["momentum"] == 0.9


def test_load_state_dict_checks_group_sizes():
    a = optim.SGD([nn.Parameter(flow.ones(2)), nn.Parameter(flow.ones(2))], lr=0.1)
    b = optim.SGD([nn.Parameter(flow.ones(2))], lr=0.1)
    with pytest.raises(ValueError) as info:
        b.load_state_dict(a.state_dict())
    assert str(info.value) == (
        "SGD.load_state_dict: parameter group 0 has 2 parameters in the state dict and 1 in the optimizer"
    )


def test_add_param_group():
    p1, p2 = nn.Parameter(flow.ones(1)), nn.Parameter(flow.ones(1))
    opt = optim.SGD([p1], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": p2, "lr": 0.5})
    assert opt.param_groups[1]["lr"] == 0.5
    assert opt.param_groups[1]["momentum"] == 0.9
    with pytest.raises(ValueError) as info:
        opt.add_param_group({"params": [p1]})
    assert str(info.value) == "SGD: some parameters appear in more than one parameter group"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda ps: optim.SGD(ps, lr=-1.0), "SGD: invalid learning rate -1.0 (expected lr >= 0)"),
        (
            lambda ps: optim.SGD(ps, lr=0.1, momentum=-0.5),
            "SGD: invalid momentum value -0.5 (expected momentum >= 0)",
        ),
        (
            lambda ps: optim.SGD(ps, lr=0.1, weight_decay=-1),
            "SGD: invalid weight_decay value -1 (expected weight_decay >= 0)",
        ),
        (lambda ps: optim.Adam(ps, lr=-0.1), "Adam: invalid learning rate -0.1 (expected lr >= 0)"),
        (lambda ps: optim.Adam(ps, eps=-1.0), "Adam: invalid epsilon value -1.0 (expected eps >= 0)"),
        (
            lambda ps: optim.Adam(ps, betas=(0.9, 1.0)),
            "Adam: invalid beta parameter at index 1: 1.0 (expected 0 <= beta < 1)",
        ),
        (
            lambda ps: optim.AdamW(ps, weight_decay=-0.1),
            "AdamW: invalid weight_decay value -0.1 (expected weight_decay >= 0)",
        ),
    ],
)
def test_argument_errors(make, message):
    with pytest.raises(ValueError) as info:
        make([nn.Parameter(flow.ones(1))])
    assert str(info.value) == message


def test_type_errors():
    with pytest.raises(TypeError) as info:
        optim.SGD(nn.Parameter(flow.ones(1)), lr=0.1)
    assert str(info.value) == "SGD: params should be an iterable of Tensors or dicts, got a single Tensor"
    with pytest.raises(ValueError) as info:
        x = flow.ones(1, requires_grad=True)
        optim.SGD([x * 2], lr=0.1)
    assert str(info.value) == "SGD: can't optimize a non-leaf Tensor"


# ---- lr schedulers ----


def _scheduler_pair(make_torch, make_flow, lrs=(0.1, 0.01)):
    torch = _torch()
    opt_t = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.ones(1))], "lr": lr} for lr in lrs], lr=1.0)
    opt_f = optim.SGD([{"params": [nn.Parameter(flow.ones(1))], "lr": lr} for lr in lrs], lr=1.0)
    return opt_t, make_torch(opt_t), opt_f, make_flow(opt_f)


def _compare_schedules(make_torch, make_flow, epochs=25):
    import warnings

    opt_t, sched_t, opt_f, sched_f = _scheduler_pair(make_torch, make_flow)
    assert sched_f.get_last_lr() == pytest.approx(sched_t.get_last_lr())
    for _ in range(epochs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns when step() precedes optimizer.step()
            opt_t.step()
            opt_f.step()
            sched_t.step()
            sched_f.step()
        assert sched_f.get_last_lr() == pytest.approx(sched_t.get_last_lr(), rel=1e-12, abs=1e-15)
        assert [g["lr"] for g in opt_f.param_groups] == pytest.approx([g["lr"] for g in opt_t.param_groups])


def test_step_lr_matches_torch():
    torch = _torch()
    _compare_schedules(
        lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=4, gamma=0.5),
        lambda o: optim.lr_scheduler.StepLR(o, step_size=4, gamma=0.5),
    )


def test_multistep_lr_matches_torch():
    torch = _torch()
    _compare_schedules(
        lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[3, 7, 7, 12], gamma=0.3),
        lambda o: optim.lr_scheduler.MultiStepLR(o, milestones=[3, 7, 7, 12], gamma=0.3),
    )


def test_cosine_annealing_lr_matches_torch():
    torch = _torch()
    # 25 epochs over T_max=10 also covers the restart branch.
    _compare_schedules(
        lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
        lambda o: optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
    )


def test_lambda_lr_matches_torch():
    torch = _torch()
    _compare_schedules(
        lambda o: torch.optim.lr_scheduler.LambdaLR(o, [lambda e: 0.9**e, lambda e: 1 / (e + 1)]),
        lambda o: optim.lr_scheduler.LambdaLR(o, [lambda e: 0.9**e, lambda e: 1 / (e + 1)]),
    )


def test_scheduler_state_dict_resumes():
    opt = optim.SGD([nn.Parameter(flow.ones(1))], lr=1.0)
    sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(3):
        opt.step()
        sched.step()
    sd = sched.state_dict()
    assert "optimizer" not in sd
    opt2 = optim.SGD([nn.Parameter(flow.ones(1))], lr=1.0)
    sched2 = optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    sched2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = sched2.get_last_lr()[0]
    opt.step()
    sched.step()
    opt2.step()
    sched2.step()
    assert sched2.get_last_lr() == sched.get_last_lr() == [0.25]


def test_lambda_lr_errors():
    opt = optim.SGD([nn.Parameter(flow.ones(1))], lr=1.0)
    with pytest.raises(ValueError) as info:
        optim.lr_scheduler.LambdaLR(opt, [lambda e: 1.0, lambda e: 1.0])
    assert str(info.value) == "LambdaLR: expected 1 lr_lambdas, got 2"


def test_cosine_reaches_eta_min_at_t_max():
    opt = optim.SGD([nn.Parameter(flow.ones(1))], lr=1.0)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.0)
    lrs = []
    for _ in range(4):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    expected = [(1 + math.cos(math.pi * e / 4)) / 2 for e in range(1, 5)]
    assert lrs == pytest.approx(expected, abs=1e-12)


def test_state_reads_like_a_defaultdict():
    p = nn.Parameter(flow.ones(1))
    opt = optim.SGD([p], lr=0.1)
    assert p not in opt.state
    assert opt.state[p] == {}
    opt.state[p]["note"] = 1
    assert opt.state[p] == {"note": 1}
    assert len(opt.state) == 1
