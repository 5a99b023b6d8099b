"""DistributedDataParallel, autograd.Function and SyncBatchNorm, with real processes where the
behaviour needs several ranks."""

import os
import re

import numpy as np
import pytest

import oneflow as flow
import oneflow.nn as nn
from oneflow.nn.parallel import DistributedDataParallel as DDP
from test_comm import DEVICES, DIST, ROOT, env_with, free_port, launch


def run_dist(nproc, script, *args, timeout=180, **kw):
    return launch("--nproc_per_node", nproc, "--master_port", free_port(),
                  os.path.join(DIST, script), *args, timeout=timeout, **kw)


# ddp_check.py compares every averaged .grad with the one-process gradient, and the parameters
# after every step; each case runs with SGD too, whose step (unlike Adam's) changes when every
# gradient is scaled by the same factor.
@pytest.mark.parametrize("model,opt,extra,env", [
    ("mlp", "sgd", [], {}),
    ("mlp", "adam", [], {}),
    ("lenet", "sgd", [], {}),
    ("lenet", "adam", ["-", "0.001"], {}),  # tiny buckets: one per parameter
    ("lenet", "sgd", ["-", "0.001"], {}),
    ("mlp", "sgd", ["no_sync"], {}),
    ("lenet", "adam", ["no_sync"], {}),
    ("mlp", "sgd", ["zero_in_place"], {}),
    # Buckets reduced on the communication thread, overlapping backward (the default only
    # where cores are to spare), through shared memory and over TCP.
    ("lenet", "adam", ["no_sync", "0.001"], {"ONEFLOW_DDP_OVERLAP": "1"}),
    ("lenet", "sgd", ["no_sync", "0.001"], {"ONEFLOW_DDP_OVERLAP": "1"}),
    ("mlp", "sgd", ["zero_in_place"], {"ONEFLOW_DDP_OVERLAP": "1"}),
    ("mlp", "adam", ["-", "0.001"], {"ONEFLOW_DDP_OVERLAP": "1", "ONEFLOW_SHM": "0"}),
    ("mlp", "sgd", ["-", "0.001"], {"ONEFLOW_DDP_OVERLAP": "1", "ONEFLOW_SHM": "0"}),
    ("lenet", "sgd", [], {"ONEFLOW_DDP_OVERLAP": "0", "ONEFLOW_SHM": "0"}),
])
def test_ddp_equals_one_process_training(model, opt, extra, env):
    r = run_dist(2, "ddp_check.py", model, opt, *extra, env=env_with(**env))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("equals one process") == 2, r.stdout


def test_ddp_overlap_setting_is_checked():
    r = run_dist(2, "ddp_check.py", "mlp", "sgd", env=env_with(ONEFLOW_DDP_OVERLAP="yes"))
    assert r.returncode != 0
    assert "DistributedDataParallel: ONEFLOW_DDP_OVERLAP must be 0, 1 or auto, got 'yes'" in r.stderr


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_ddp_on_four_ranks_equals_one_process(opt):
    # Four ranks: an average that divides by 2 (or not at all) instead of 4 is off by a factor.
    r = run_dist(4, "ddp_check.py", "mlp", opt, "-", "0.001")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("equals one process") == 4


@pytest.mark.parametrize("device", DEVICES)
def test_ddp_tutorial_matches_published_output(device):
    r = launch("--nproc_per_node", 2, "--master_port", free_port(),
               os.path.join(ROOT, "examples", "ddp_train.py"), timeout=120, device=device)
    assert r.returncode == 0, r.stderr
    losses = {}
    for rank, step, loss in re.findall(r"\[rank (\d)\] (\d+)/500 loss:(\S+)", r.stdout):
        losses[(int(rank), int(step))] = float(loss)
    # OneFlow's published output for this script (float32 all the way).
    np.testing.assert_allclose(losses[(0, 50)], 0.00025336415274068713, rtol=1e-5)
    np.testing.assert_allclose(losses[(1, 50)], 0.004111831542104483, rtol=1e-5)
    assert losses[(0, 500)] < 1e-10 and losses[(1, 500)] < 1e-10
    np.testing.assert_allclose(losses[(0, 500)], 4.547473508864641e-12, rtol=0.5)
    np.testing.assert_allclose(losses[(1, 500)], 6.184563972055912e-11, rtol=0.5)
    for rank in (0, 1):
        mine = "\n".join(l.split("] ", 1)[1] for l in r.stdout.splitlines()
                         if l.startswith(f"[rank {rank}] "))
        assert "tensor([[2.0000],\n        [3.0000]]" in mine, mine


def test_unused_parameter_finishes_with_find_unused_parameters():
    r = run_dist(2, "ddp_cases.py", "unused")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("head_b grad averaged") == 2


def test_unused_parameter_without_the_flag_is_a_clear_error_not_a_hang():
    r = run_dist(2, "ddp_cases.py", "unused_error", timeout=60)
    assert r.returncode != 0
    assert ("DistributedDataParallel: parameter 'head_b.weight' got no gradient in this backward "
            "on rank 1 (it took no part in the loss); pass find_unused_parameters=True") in r.stderr
    assert "rank 1" in r.stderr.splitlines()[-1] or "rank 1 (pid" in r.stderr


def test_parameter_shapes_must_agree_at_wrap_time():
    r = run_dist(2, "ddp_cases.py", "shapes", timeout=60)
    assert r.returncode != 0
    assert ("DistributedDataParallel: parameter '1.weight' has shape (4, 4) on rank 0 but "
            "(8, 4) on rank 1; every rank must build the same model") in r.stdout + r.stderr


def test_parameter_counts_must_agree_at_wrap_time():
    r = run_dist(2, "ddp_cases.py", "count", timeout=60)
    assert r.returncode != 0
    assert ("DistributedDataParallel: rank 1 has 4 parameters but rank 0 has 2 (first missing: "
            "'1.weight'); every rank must build the same model") in r.stdout + r.stderr


def test_parameters_and_buffers_come_from_rank_zero():
    r = run_dist(2, "ddp_cases.py", "buffers")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("broadcast from rank 0") == 2


def test_ddp_in_one_process_is_plain_training():
    flow.manual_seed(0)
    model = nn.Linear(3, 2)
    ref = nn.Linear(3, 2)
    ref.load_state_dict(model.state_dict())
    ddp = DDP(model)
    x = flow.randn(5, 3)
    ddp(x).sum().backward()
    ref(x).sum().backward()
    assert np.allclose(model.weight.grad.numpy(), ref.weight.grad.numpy())
    # The wrapper answers for the module's attributes and names its parameters module.*.
    assert ddp.in_features == 3 and ddp.weight is model.weight
    assert list(ddp.state_dict()) == ["module.weight", "module.bias"]
    assert ddp.comm_stats()["reductions"] == 1


def test_ddp_backward_without_forward_through_the_wrapper_is_an_error():
    model = nn.Linear(3, 2)
    ddp = DDP(model)
    with pytest.raises(RuntimeError, match=r"DistributedDataParallel: a gradient reached "
                       r"parameter '(weight|bias)' in a backward pass that did not follow a forward"):
        model(flow.randn(2, 3)).sum().backward()


def test_ddp_argument_errors():
    with pytest.raises(TypeError, match="DistributedDataParallel: expected an nn.Module, got int"):
        DDP(3)
    with pytest.raises(ValueError, match="DistributedDataParallel: bucket_cap_mb must be positive, got 0"):
        DDP(nn.Linear(2, 2), bucket_cap_mb=0)
    with pytest.raises(TypeError, match="DistributedDataParallel: process_group must be a list of "
                       "ranks, a group from new_group or None, got int"):
        DDP(nn.Linear(2, 2), process_group=0)
    with pytest.raises(ValueError, match="DistributedDataParallel: parameter 'weight' is a global tensor"):
        DDP(nn.Linear(2, 2).to_global(flow.placement("cpu", ranks=[0]), flow.sbp.broadcast))


class Cube(flow.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * x * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * ctx.scale * grad, None


def test_autograd_function_matches_finite_differences():
    x = flow.tensor([0.5, -1.0, 2.0], dtype=flow.float64, requires_grad=True)
    y = Cube.apply(x, 2.0)
    assert y.grad_fn is not None and "CubeBackward" in str(y.grad_fn)
    (y * flow.tensor([1.0, 2.0, 3.0], dtype=flow.float64)).sum().backward()
    eps = 1e-6
    xs = x.detach().numpy()
    fd = [(2 * (xs[i] + eps) ** 3 - 2 * (xs[i] - eps) ** 3) / (2 * eps) * (i + 1) for i in range(3)]
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-6)


def test_autograd_function_errors():
    class Bad(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    x = flow.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Bad.backward: returned 2 gradients, expected 1 "
                       r"\(one per forward argument\)"):
        Bad.apply(x).sum().backward()
    y = Cube.apply(x, 1.0).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_autograd_function_outputs_must_be_tensors():
    class Pair(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, 3

    with pytest.raises(TypeError, match=r"Pair.forward: expected tensors as outputs, got "
                       r"\['Tensor', 'int'\]"):
        Pair.apply(flow.ones(2, requires_grad=True))


def test_queue_callback_runs_after_backward():
    seen = []
    w = flow.ones(2, requires_grad=True)
    w.register_post_accumulate_grad_hook(
        lambda p: flow.autograd.queue_callback(lambda: seen.append(p.grad.sum().item())))
    (w * 3).sum().backward()
    assert seen == [6.0]
    with pytest.raises(RuntimeError, match="queue_callback: no backward pass is running"):
        flow.autograd.queue_callback(lambda: None)


@pytest.mark.parametrize("layout", ["even", "uneven"])
def test_sync_batchnorm_equals_batchnorm_over_the_global_batch(layout):
    r = run_dist(2, "syncbn_check.py", *(["uneven"] if layout == "uneven" else []))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("SyncBatchNorm equals one-process BatchNorm") == 2


def test_sync_batchnorm_in_one_process_is_batchnorm():
    flow.manual_seed(0)
    bn = nn.BatchNorm2d(3)
    sync = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm2d(3)))[0]
    assert isinstance(sync, nn.SyncBatchNorm)
    x = flow.randn(4, 3, 5, 5)
    assert np.allclose(bn(x).detach().numpy(), sync(x).detach().numpy(), atol=1e-6)
    assert np.allclose(bn.running_var.numpy(), sync.running_var.numpy())
    with pytest.raises(ValueError, match=r"SyncBatchNorm: expected 2D or 3D or 4D input \(got 5D input\)"):
        sync(flow.randn(2, 3, 2, 2, 2))


def test_batchnorm_on_a_split_global_batch_of_one_row_is_a_clear_error():
    P1 = flow.placement("cpu", ranks=[0])
    x = flow.randn(1, 3).to_global(placement=P1, sbp=flow.sbp.split(0))
    bn = nn.BatchNorm1d(3).to_global(placement=P1, sbp=flow.sbp.broadcast)
    with pytest.raises(ValueError, match=r"BatchNorm1d: expected more than 1 value per channel over "
                       r"the whole batch when training, got input of shape \(1, 3\)"):
        bn(x)
