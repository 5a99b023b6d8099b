"""oneflow on CUDA as a PyTorch user meets it: moving tensors and models with .to('cuda'),
printing and reading CUDA tensors, autograd across devices, training on the GPU against the same
steps on the CPU, saving from the GPU, oneflow.cuda's queries and the TF32 switches.

The GPU tests skip, saying why, on a machine without a usable GPU or in a build without CUDA;
with ONEFLOW_REQUIRE_CUDA=1 (set it on a GPU machine) they fail instead, with the same reason,
so a broken driver cannot pass as skipped. The tests of what a user meets there (is_available,
the errors of .to('cuda') and current_device, the switches' defaults) run everywhere.

Every op's CUDA kernel is compared with its CPU kernel, forward and gradient, in C++
(tests/core/cuda_kernels_test.cc); here the Python paths around them are checked."""

import copy
import functools
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import oneflow as flow
import oneflow.nn as nn
import oneflow.nn.functional as F
import oneflow.optim as optim

HAS_CUDA = flow.cuda.is_available()


def _check_cuda():
    """Returns where CUDA is usable. Elsewhere skips the calling test saying why, or, with
    ONEFLOW_REQUIRE_CUDA=1, fails it with that reason (driver and runtime versions included)."""
    if HAS_CUDA:
        return
    why = f"no CUDA device: {flow.cuda.unavailable_reason()}"
    if os.environ.get("ONEFLOW_REQUIRE_CUDA", "") not in ("", "0"):
        pytest.fail(f"ONEFLOW_REQUIRE_CUDA=1 but CUDA is not usable here: {why}", pytrace=False)
    pytest.skip(why)


def requires_cuda(test):
    """Marks a test that needs a GPU (see _check_cuda)."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        _check_cuda()
        return test(*args, **kwargs)

    return run


def _numpy(t):
    return t.detach().to("cpu").numpy()


def _assert_close(cuda_tensor, cpu_tensor, tol=1e-4):
    """A CUDA result against the CPU one: same shape and dtype, values within tol."""
    assert str(cuda_tensor.device) == "cuda:0"
    assert str(cpu_tensor.device) == "cpu"
    assert tuple(cuda_tensor.shape) == tuple(cpu_tensor.shape)
    assert cuda_tensor.dtype == cpu_tensor.dtype
    np.testing.assert_allclose(_numpy(cuda_tensor), _numpy(cpu_tensor), rtol=tol, atol=tol)


def _random(*shape, seed=0, low=-1.0, high=1.0):
    return flow.tensor(np.random.default_rng(seed).uniform(low, high, size=shape).astype(np.float32))


@pytest.fixture
def no_tf32():
    """float32 matmul and convolution in full float32 (cuDNN's TF32 is on by default)."""
    saved = flow.backends.cuda.matmul.allow_tf32, flow.backends.cudnn.allow_tf32
    flow.backends.cuda.matmul.allow_tf32 = False
    flow.backends.cudnn.allow_tf32 = False
    yield
    flow.backends.cuda.matmul.allow_tf32, flow.backends.cudnn.allow_tf32 = saved


# =============================================================== everywhere


def test_is_available_is_a_bool_that_follows_the_device_count():
    assert isinstance(flow.cuda.is_available(), bool)
    n = flow.cuda.device_count()
    assert isinstance(n, int) and n >= 0
    assert flow.cuda.is_available() == (n > 0)


def test_unavailable_reason_says_why_there_is_no_device():
    reason = flow.cuda.unavailable_reason()
    assert isinstance(reason, str)
    if flow.cuda.device_count() == 0:
        assert reason != ""
    else:
        assert reason == ""


def test_cuda_libraries_are_looked_for_in_pips_nvidia_packages_then_cuda_path(tmp_path):
    # The loader is built with or without CUDA (core/kernels/cuda/cuda_libs.h).
    # A site-packages folder holding pip's NVIDIA packages (CUDA 13's share nvidia/cu13/lib).
    site = tmp_path / "site-packages"
    for package in ("cu13", "cudnn", "nccl"):
        (site / "nvidia" / package / "lib").mkdir(parents=True)
    (site / "nvidia" / "not_a_library_package").mkdir()
    env = dict(os.environ, CUDA_PATH=str(tmp_path / "toolkit"),
               PYTHONPATH=os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(site)]))
    run = subprocess.run([sys.executable, "-c", "import oneflow as flow; "
                          "print(flow.cuda.library_search_path())"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    nvidia = site / "nvidia"
    assert run.stdout.strip() == (f"already loaded, $LD_LIBRARY_PATH, {nvidia}/cu13/lib, "
                                  f"{nvidia}/cudnn/lib, {nvidia}/nccl/lib, the system's library "
                                  f"path, {tmp_path}/toolkit/lib64"), run.stdout


@pytest.mark.skipif(
    HAS_CUDA or not flow.backends.cuda.is_built(),
    reason="CUDA works here, or the build has no CUDA",
)
def test_unavailable_reason_names_the_driver_and_runtime_versions():
    reason = flow.cuda.unavailable_reason()
    assert "\n" not in reason
    assert re.search(r"\(.*driver (0|\d+\.\d+) / runtime \d+\.\d+\)$", reason), reason


def test_without_cuda_gpu_tests_skip_or_fail_under_oneflow_require_cuda(monkeypatch):
    monkeypatch.delenv("ONEFLOW_REQUIRE_CUDA", raising=False)
    if HAS_CUDA:
        _check_cuda()
    else:
        with pytest.raises(pytest.skip.Exception, match="no CUDA device: "):
            _check_cuda()
    # The whole path, as CI on a GPU machine runs it: a GPU test under ONEFLOW_REQUIRE_CUDA=1
    # passes where CUDA works and fails, saying why, where it does not.
    env = dict(os.environ, ONEFLOW_REQUIRE_CUDA="1")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"{__file__}::test_creation_on_cuda"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    out = run.stdout + run.stderr
    if HAS_CUDA:
        assert run.returncode == 0, out
    else:
        assert run.returncode == 1, out
        assert "1 failed" in out, out
        assert "ONEFLOW_REQUIRE_CUDA=1 but CUDA is not usable here: no CUDA device: " in out, out
        if flow.backends.cuda.is_built():
            assert "driver" in out, out


@pytest.mark.skipif(HAS_CUDA, reason="a CUDA device is available")
def test_to_cuda_without_a_device_names_the_reason():
    for move in (lambda t: t.to("cuda"), lambda t: t.cuda(), lambda t: t.to("cuda:0")):
        with pytest.raises(RuntimeError) as e:
            move(flow.ones(2))
        message = str(e.value)
        if flow.backends.cuda.is_built():
            assert message.startswith("to: CUDA is not available"), message
            assert flow.cuda.unavailable_reason() in message
        else:
            assert "no CUDA support" in message, message


@pytest.mark.skipif(HAS_CUDA, reason="a CUDA device is available")
def test_current_device_without_a_device_is_an_error():
    with pytest.raises(RuntimeError, match="not available"):
        flow.cuda.current_device()


def test_matmul_tf32_is_off_by_default_and_toggles():
    assert flow.backends.cuda.matmul.allow_tf32 is False
    try:
        flow.backends.cuda.matmul.allow_tf32 = True
        # A build without CUDA has no switch to set: it reads off.
        assert flow.backends.cuda.matmul.allow_tf32 is flow.backends.cuda.is_built()
    finally:
        flow.backends.cuda.matmul.allow_tf32 = False
    assert flow.backends.cuda.matmul.allow_tf32 is False


def test_cudnn_tf32_is_on_by_default_and_toggles():
    assert flow.backends.cudnn.allow_tf32 is True
    try:
        flow.backends.cudnn.allow_tf32 = False
        # A build without CUDA has no switch to set: it reads on.
        assert flow.backends.cudnn.allow_tf32 is (not flow.backends.cuda.is_built())
    finally:
        flow.backends.cudnn.allow_tf32 = True
    assert flow.backends.cudnn.allow_tf32 is True


# =============================================================== tensors on the GPU


@requires_cuda
@pytest.mark.parametrize(
    "values, np_dtype, dtype",
    [
        ([1.5, -2.25, 0.0, 3e-8], np.float32, flow.float32),
        ([1.5, -2.25, 0.0, 1e-300], np.float64, flow.float64),
        ([1, -2, 2**40, 0], np.int64, flow.int64),
        ([True, False, True], np.bool_, flow.bool),
        ([1.5, -2.25, 0.0, 65504.0], np.float16, flow.float16),
    ],
)
def test_to_cuda_and_back_keeps_values_and_dtype(values, np_dtype, dtype):
    a = np.array(values, dtype=np_dtype)
    x = flow.tensor(a)
    y = x.to("cuda")
    assert y.is_cuda and not x.is_cuda
    assert str(y.device) == "cuda:0"
    assert y.dtype == dtype
    back = y.to("cpu")
    assert str(back.device) == "cpu" and back.dtype == dtype
    np.testing.assert_array_equal(back.numpy(), a)
    assert back.numpy().dtype == a.dtype
    assert x.cuda().cpu().tolist() == x.tolist()
    made_there = flow.tensor(a, device="cuda")
    assert str(made_there.device) == "cuda:0" and made_there.dtype == dtype
    assert made_there.tolist() == x.tolist()


@requires_cuda
def test_casts_on_cuda_match_casts_on_cpu():
    x = flow.tensor([0.1, -3.7, 65504.0, 2.5, -0.0, 1e-5])
    for dtype in (flow.float16, flow.bfloat16, flow.float64, flow.int64, flow.int32, flow.bool):
        assert x.to("cuda").to(dtype).tolist() == x.to(dtype).tolist(), dtype


@requires_cuda
def test_printing_a_cuda_tensor_names_its_device():
    x = flow.tensor([[1.0, 2.5], [-3.0, 4.0]])
    y = x.to("cuda")
    assert "device='cuda:0'" in repr(y)
    assert "device='cuda:0'" in str(y)
    # The same text as on the CPU, with the device added.
    assert repr(y).replace("device='cuda:0', ", "") == repr(x)
    assert "device='cuda:0'" in repr(flow.tensor([1, 2]).cuda())


@requires_cuda
def test_numpy_item_and_tolist_of_cuda_tensors():
    x = flow.tensor([[1.0, 2.5], [-3.0, 4.0]])
    y = x.to("cuda")
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    assert y.numpy().dtype == np.float32
    assert y.tolist() == [[1.0, 2.5], [-3.0, 4.0]]
    assert y[1, 0].item() == -3.0
    assert flow.tensor(7).cuda().item() == 7
    assert flow.tensor(True).cuda().item() is True
    assert float(y.sum()) == 4.5


@requires_cuda
def test_creation_on_cuda():
    assert flow.zeros(2, 3, device="cuda").tolist() == [[0.0] * 3] * 2
    assert str(flow.ones(2, device="cuda").device) == "cuda:0"
    assert flow.arange(5, device="cuda").tolist() == [0, 1, 2, 3, 4]
    assert flow.full((2,), 1.5, device="cuda").tolist() == [1.5, 1.5]
    flow.manual_seed(3)
    a = flow.rand(4, device="cuda").tolist()
    flow.manual_seed(3)
    assert flow.rand(4).tolist() == a  # one generator for every device


@requires_cuda
def test_gradient_flows_back_through_to_cuda_to_the_cpu_leaf():
    x = flow.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x.to("cuda")
    assert y.requires_grad and y.grad_fn is not None
    loss = (y * y).sum().to("cpu")
    loss.backward()
    assert str(x.grad.device) == "cpu"
    assert x.grad.tolist() == [2.0, -4.0, 6.0]


@requires_cuda
def test_gradient_of_a_cuda_leaf_stays_on_cuda():
    w = flow.ones(3, device="cuda", requires_grad=True)
    x = flow.tensor([1.0, 2.0, 3.0])
    (w * x.to("cuda")).sum().backward()
    assert str(w.grad.device) == "cuda:0"
    assert w.grad.tolist() == [1.0, 2.0, 3.0]


@requires_cuda
def test_ops_mixing_devices_name_both():
    with pytest.raises(RuntimeError) as e:
        flow.ones(2).to("cuda") + flow.ones(2)
    assert "cuda:0" in str(e.value) and "cpu" in str(e.value), str(e.value)


@requires_cuda
def test_synchronize():
    x = flow.ones(256, 256, device="cuda")
    y = x @ x
    flow.cuda.synchronize()
    flow.cuda.synchronize(0)
    flow.cuda.synchronize("cuda:0")
    assert y[0, 0].item() == 256.0
    assert flow.cuda.current_device() == 0


@requires_cuda
def test_memory_allocated_follows_allocations():
    flow.cuda.synchronize()
    before = flow.cuda.memory_allocated()
    x = flow.empty(1024, 1024, device="cuda")  # 4 MiB
    during = flow.cuda.memory_allocated()
    assert during >= before + 4 * 1024 * 1024
    assert flow.cuda.memory_reserved() >= during
    del x
    assert flow.cuda.memory_allocated() < during
    flow.cuda.empty_cache()
    assert flow.cuda.memory_reserved() >= flow.cuda.memory_allocated()


# =============================================================== models and training


def _model():
    flow.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * 3 * 3, 5),
    )


@requires_cuda
def test_model_on_cuda_matches_the_cpu_forward_and_backward(no_tf32):
    cpu = _model()
    gpu = copy.deepcopy(cpu).to("cuda")
    for p in gpu.parameters():
        assert str(p.device) == "cuda:0" and p.is_leaf
    x = _random(4, 3, 6, 6, seed=1)
    target = flow.tensor([0, 3, 1, 4])
    out_cpu, out_gpu = cpu(x), gpu(x.to("cuda"))
    _assert_close(out_gpu, out_cpu)
    loss_cpu = F.cross_entropy(out_cpu, target)
    loss_gpu = F.cross_entropy(out_gpu, target.to("cuda"))
    _assert_close(loss_gpu, loss_cpu)
    loss_cpu.backward()
    loss_gpu.backward()
    for (name, p_cpu), (_, p_gpu) in zip(cpu.named_parameters(), gpu.named_parameters()):
        assert p_gpu.grad is not None, name
        _assert_close(p_gpu.grad, p_cpu.grad)
    # Batch norm's running statistics are updated in place on the device.
    _assert_close(gpu[1].running_mean, cpu[1].running_mean)
    _assert_close(gpu[1].running_var, cpu[1].running_var)
    gpu.eval()
    cpu.eval()
    _assert_close(gpu(x.to("cuda")), cpu(x))


@requires_cuda
def test_model_moves_back_to_the_cpu():
    m = _model()
    before = {k: v.tolist() for k, v in m.state_dict().items()}
    m.to("cuda").cpu()
    for k, v in m.state_dict().items():
        assert str(v.device) == "cpu", k
        assert v.tolist() == before[k], k


@requires_cuda
@pytest.mark.parametrize(
    "make",
    [
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
        lambda ps: optim.Adam(ps, lr=0.01),
        lambda ps: optim.Adam(ps, lr=0.01, weight_decay=0.01, amsgrad=True),
        lambda ps: optim.AdamW(ps, lr=0.01),
    ],
    ids=["sgd_momentum", "sgd_nesterov", "adam", "adam_amsgrad", "adamw"],
)
def test_optimizer_steps_on_cuda_match_the_cpu(make):
    cpu_params = [nn.Parameter(_random(3, 4, seed=2)), nn.Parameter(_random(4, seed=3))]
    gpu_params = [nn.Parameter(p.detach().to("cuda")) for p in cpu_params]
    opt_cpu, opt_gpu = make(cpu_params), make(gpu_params)
    for step in range(5):
        for i, (p_cpu, p_gpu) in enumerate(zip(cpu_params, gpu_params)):
            g = _random(*p_cpu.shape, seed=10 * step + i)
            p_cpu.grad = g
            p_gpu.grad = g.to("cuda")
        opt_cpu.step()
        opt_gpu.step()
        for p_cpu, p_gpu in zip(cpu_params, gpu_params):
            _assert_close(p_gpu, p_cpu, tol=1e-5)
    for p in gpu_params:  # the optimizer's state lives with its parameter
        for v in opt_gpu.state[p].values():
            if isinstance(v, flow.Tensor) and v.ndim > 0:
                assert str(v.device) == "cuda:0"


def _train(device, steps=5):
    """The quickstart tutorial's loop: an MLP, cross entropy and SGD on fixed data."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    model = model.to(device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(5)
    x = flow.tensor(rng.standard_normal((64, 20)).astype(np.float32)).to(device)
    y = flow.tensor(rng.integers(0, 4, size=64)).to(device)
    losses = []
    for _ in range(steps):
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, model


@requires_cuda
def test_training_loop_on_cuda_matches_the_cpu(no_tf32):
    losses_cpu, model_cpu = _train("cpu")
    losses_gpu, model_gpu = _train("cuda")
    assert losses_cpu[-1] < losses_cpu[0]  # it trains
    np.testing.assert_allclose(losses_gpu, losses_cpu, rtol=1e-4, atol=1e-4)
    for (name, p_cpu), (_, p_gpu) in zip(model_cpu.named_parameters(), model_gpu.named_parameters()):
        assert str(p_gpu.device) == "cuda:0", name
        _assert_close(p_gpu, p_cpu)


@requires_cuda
def test_saving_a_cuda_state_dict_and_loading_it_on_the_cpu(tmp_path):
    model = _model().to("cuda")
    path = tmp_path / "model.pt"
    flow.save(model.state_dict(), path)
    state = model.state_dict()

    on_cpu = flow.load(path, map_location="cpu")
    assert list(on_cpu) == list(state)
    for k, v in on_cpu.items():
        assert str(v.device) == "cpu", k
        assert v.dtype == state[k].dtype, k
        assert v.tolist() == state[k].tolist(), k
    cpu_model = _model()
    cpu_model.load_state_dict(on_cpu)
    for k, v in cpu_model.state_dict().items():
        assert v.tolist() == state[k].tolist(), k

    # Without map_location a tensor comes back on the device it was saved from.
    for k, v in flow.load(path).items():
        assert str(v.device) == "cuda:0", k


# =============================================================== TF32


@requires_cuda
def test_tf32_switch_changes_only_the_float32_matmul_precision():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((128, 512)).astype(np.float32)
    b = rng.standard_normal((512, 64)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    ga, gb = flow.tensor(a).to("cuda"), flow.tensor(b).to("cuda")
    saved = flow.backends.cuda.matmul.allow_tf32
    try:
        flow.backends.cuda.matmul.allow_tf32 = False
        assert flow.backends.cuda.matmul.allow_tf32 is False
        full = (ga @ gb).numpy()
        flow.backends.cuda.matmul.allow_tf32 = True
        assert flow.backends.cuda.matmul.allow_tf32 is True
        tf32 = (ga @ gb).numpy()
    finally:
        flow.backends.cuda.matmul.allow_tf32 = saved
    scale = np.abs(exact).max()
    # float32 accumulates 512 products to ~1e-6 of the largest value; TF32 rounds each operand
    # to 10 mantissa bits (~1e-3 relative), which stays well inside 1e-2.
    assert np.abs(full - exact).max() <= 1e-5 * scale
    assert np.abs(tf32 - exact).max() <= 1e-2 * scale


@requires_cuda
def test_cudnn_tf32_switch_keeps_convolutions_close():
    x = _random(2, 8, 10, 10, seed=8)
    conv = nn.Conv2d(8, 16, 3, padding=1)
    want = conv(x)
    gpu = copy.deepcopy(conv).to("cuda")
    saved = flow.backends.cudnn.allow_tf32
    try:
        flow.backends.cudnn.allow_tf32 = False
        _assert_close(gpu(x.to("cuda")), want, tol=1e-4)
        flow.backends.cudnn.allow_tf32 = True
        _assert_close(gpu(x.to("cuda")), want, tol=1e-2)
    finally:
        flow.backends.cudnn.allow_tf32 = saved


@requires_cuda
def test_random_draws_on_cuda_are_the_cpus_bit_for_bit():
    # Drawn on the device by the CPU's counter-based generator (core/ops/counter_rng.h).
    def both(draw):
        flow.manual_seed(11)
        on_cuda = _numpy(draw("cuda"))
        flow.manual_seed(11)
        return on_cuda, _numpy(draw("cpu"))

    x = flow.ones(3, 1000)
    for draw in (lambda d: flow.rand(3, 1000, device=d),
                 lambda d: flow.rand(2, 999, device=d, dtype=flow.float64),
                 lambda d: flow.randint(-5, 9, (4097,), device=d),
                 lambda d: flow.randperm(1025, device=d),
                 lambda d: flow.rand(1000, device=d, dtype=flow.bfloat16).float(),
                 lambda d: F.dropout(x.to(d), 0.3, training=True),
                 lambda d: F.dropout(x.to(d).half(), 0.5, training=True).float()):
        a, b = both(draw)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (a[:8], b[:8])
    # normal's log and cos are the platforms' (within 1 ulp): float32 rounds the difference off.
    a, b = both(lambda d: flow.randn(4, 1025, device=d))
    assert np.array_equal(a, b) or np.max(np.abs(a - b)) <= 1e-6, np.max(np.abs(a - b))
    a, b = both(lambda d: flow.randn(4, 1025, device=d, dtype=flow.float64))
    assert np.allclose(a, b, rtol=1e-14, atol=1e-14)


@requires_cuda
def test_a_bad_index_is_reported_at_the_next_synchronisation_naming_the_op():
    x = flow.arange(10.0, device="cuda")
    flow.cuda.set_sync_debug_mode("error")
    try:
        y = flow.index_select(x, 0, flow.full((3,), 12, dtype=flow.int64, device="cuda"))
        z = flow.gather(x, 0, flow.full((2,), 1, dtype=flow.int64, device="cuda"))
    finally:
        flow.cuda.set_sync_debug_mode("default")  # the ops above waited for nothing
    with pytest.raises(IndexError, match=r"index_select: index 12 is out of bounds for "
                                         r"dimension 0 with size 10"):
        flow.cuda.synchronize()
    assert z.tolist() == [1.0, 1.0]  # the checks were read: later syncs see no error
    t = flow.tensor([0, 7, 1]).cuda()
    loss = F.nll_loss(flow.zeros(3, 4, device="cuda"), t)
    with pytest.raises(RuntimeError, match="nll_loss: target 7 is out of bounds for 4 classes"):
        loss.item()
    del y


@requires_cuda
def test_a_training_step_on_cuda_has_no_host_wait():
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "dist",
                                                     "sync_debug_checks.py")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.split() == ["modes", "ok", "reports", "ok", "gpt", "step", "ok", "resnet",
                                "step", "ok"], r.stdout


# =============================================================== fused attention


def _attention_case(dev, dt, shapes, kw, seed=0):
    """F.scaled_dot_product_attention on dev in dtype dt, its output and the inputs' gradients
    (float32 numpy), from inputs drawn in float32 and rounded to dt."""
    rs = np.random.default_rng(seed)
    arrays = [rs.standard_normal(s).astype(np.float32) for s in shapes]
    ts = [flow.tensor(a).to(dt).to(dev).detach().requires_grad_(True) for a in arrays]
    kw = dict(kw)
    if "attn_mask" in kw:
        kw["attn_mask"] = kw["attn_mask"].to(dev)
    flow.manual_seed(7)
    y = F.scaled_dot_product_attention(*ts, **kw)
    w = flow.tensor(rs.standard_normal(tuple(y.shape)).astype(np.float32)).to(dt).to(dev)
    (y * w).sum().backward()
    return [_numpy(y.float())] + [_numpy(t.grad.float()) for t in ts]


@requires_cuda
@pytest.mark.parametrize("case", [
    "E64 causal L=S=130", "E128 Ev96 bool mask [B, 1, L, S]", "E32 float mask [L, S] L=65 S=127",
    "E80 dropout causal", "E64 L=1 S=31", "E16 L=127 S=3",
])
def test_fused_attention_on_cuda_matches_the_cpu(case):
    e = int(case.split()[0][1:])
    shapes = {"E64 causal L=S=130": [(2, 3, 130, 64)] * 3,
              "E128 Ev96 bool mask [B, 1, L, S]": [(2, 2, 40, 128), (2, 2, 33, 128), (2, 2, 33, 96)],
              "E32 float mask [L, S] L=65 S=127": [(1, 2, 65, 32), (1, 2, 127, 32), (1, 2, 127, 32)],
              "E80 dropout causal": [(2, 2, 70, 80)] * 3,
              "E64 L=1 S=31": [(3, 1, 64), (3, 31, 64), (3, 31, 64)],
              "E16 L=127 S=3": [(2, 127, 16), (2, 3, 16), (2, 3, 16)]}[case]
    rs = np.random.default_rng(1)
    kw = {}
    if "causal" in case:
        kw["is_causal"] = True
    if "bool mask" in case:
        m = rs.random((2, 1, 40, 33)) > 0.3
        m[..., 0] = True
        kw["attn_mask"] = flow.tensor(m)
    if "float mask" in case:
        kw["attn_mask"] = flow.tensor(rs.standard_normal((65, 127)).astype(np.float32))
    if "dropout" in case:
        kw["dropout_p"] = 0.2
    assert shapes[0][-1] == e
    ref = _attention_case("cpu", flow.float32, shapes, kw)
    got = _attention_case("cuda", flow.float32, shapes, kw)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4)
    for dt, tol in ((flow.bfloat16, 0.08), (flow.float16, 0.02)):
        # the CPU widens the rounded inputs to float32: the same values the kernel computes on
        ref = _attention_case("cpu", dt, shapes, kw)
        got = _attention_case("cuda", dt, shapes, kw)
        for a, b in zip(got, ref):
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@requires_cuda
@pytest.mark.parametrize("dt, shapes, kw", [
    (flow.float32, [(2, 2, 40, 160)] * 3, {"is_causal": True, "dropout_p": 0.2}),
    (flow.bfloat16, [(2, 33, 192), (2, 70, 192), (2, 70, 130)], {}),
    (flow.float64, [(2, 2, 31, 64)] * 3, {"attn_mask": flow.tensor(np.tri(31, dtype=bool))}),
], ids=["E160 causal dropout", "E192 Ev130 bf16", "float64 bool mask"])
def test_attention_beyond_the_fused_kernel_is_composed_on_cuda(dt, shapes, kw):
    # head dims above 128 and float64: matmuls and elementwise kernels, the same results
    ref = _attention_case("cpu", dt, shapes, kw)
    got = _attention_case("cuda", dt, shapes, kw)
    tol = {flow.float32: 2e-4, flow.bfloat16: 0.08, flow.float64: 1e-6}[dt]
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@requires_cuda
def test_batch_norm_on_cudnn_matches_cpu_with_running_statistics():
    # cuDNN's training forward updates the running statistics itself (momentum as
    # exponentialAverageFactor, the unbiased variance); eval mode and the backward against CPU.
    x = _random(6, 5, 7, 7, seed=11) * 3 + 1
    bn = nn.BatchNorm2d(5, momentum=0.3)
    gpu = copy.deepcopy(bn).to("cuda")
    xc, xg = x.clone().requires_grad_(), x.to("cuda").requires_grad_()
    for _ in range(2):
        yc, yg = bn(xc), gpu(xg)
        _assert_close(yg, yc, tol=1e-4)
    (yc * yc).sum().backward()
    (yg * yg).sum().backward()
    _assert_close(xg.grad, xc.grad, tol=1e-3)
    _assert_close(gpu.weight.grad, bn.weight.grad, tol=1e-3)
    _assert_close(gpu.bias.grad, bn.bias.grad, tol=1e-3)
    _assert_close(gpu.running_mean, bn.running_mean, tol=1e-5)
    _assert_close(gpu.running_var, bn.running_var, tol=1e-5)
    bn.eval(), gpu.eval()
    _assert_close(gpu(x.to("cuda")), bn(x), tol=1e-4)


@requires_cuda
def test_multi_tensor_adamw_on_cuda_matches_cpu():
    def train(device):
        flow.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(device)
        opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        rs = np.random.RandomState(0)
        for _ in range(5):
            x = flow.tensor(rs.randn(7, 8).astype(np.float32)).to(device)
            loss = (model(x) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return list(model.parameters())

    for pg, pc in zip(train("cuda"), train("cpu")):
        _assert_close(pg.detach(), pc.detach(), tol=1e-4)


@requires_cuda
def test_bf16_autocast_gpt_trains_like_float32_on_the_gpu():
    from test_cuda_bf16_gpt import check_bf16_gpt_trains_like_float32

    check_bf16_gpt_trains_like_float32({})


@requires_cuda
def test_cuda_graphs_capture_and_replay_on_the_gpu():
    """tests/python/dist/cuda_graph_checks.py on the GPU (it runs on the stand-in device in
    test_cuda_graph.py): eager capture and its pool, the refusals, nn.Graph through CUDA graphs
    equal to eager training. Its output (each capture's status) is printed for the GPU run's log."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist",
                          "cuda_graph_checks.py")
    env = {k: v for k, v in os.environ.items() if k != "ONEFLOW_FAKE_CUDA"}
    r = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True,
                       timeout=300)
    print(r.stdout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
