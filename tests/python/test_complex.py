"""Complex tensors (oneflow.complex64 / cfloat, complex128 / cdouble): creation from numpy and
Python numbers, printing, the real/imag views, the complex functions and the ops that take
complex inputs, against numpy and PyTorch 1.13 (values and gradients, PyTorch's convention
z.grad = dL/dre + i dL/dim), the copy ops, the one-line refusals of the other ops, and the
stand-in CUDA device (ONEFLOW_FAKE_CUDA=1)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import oneflow as flow


def _rand(*shape, dtype=np.complex64, seed=0):
    rs = np.random.RandomState(seed)
    return (rs.uniform(-2, 2, shape) + 1j * rs.uniform(-2, 2, shape)).astype(dtype)


def _close(got, want, tol=1e-5):
    got = got.numpy() if isinstance(got, flow.Tensor) else got
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else want
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# ---------------------------------------------------------------- dtypes and conversions


def test_dtype_names_and_aliases():
    assert flow.cfloat is flow.complex64 and flow.cdouble is flow.complex128
    assert repr(flow.complex64) == "oneflow.complex64"
    assert flow.complex128.itemsize == 16 and not flow.complex64.is_floating_point
    assert flow.tensor([1j]).is_complex() and not flow.tensor([1.0]).is_complex()
    assert flow.is_complex(flow.zeros(2, dtype=flow.cdouble))


def test_numpy_round_trip_keeps_dtype_and_values():
    for np_dtype, dtype in ((np.complex64, flow.complex64), (np.complex128, flow.complex128)):
        a = _rand(3, 4, dtype=np_dtype)
        for t in (flow.tensor(a), flow.from_numpy(a)):
            assert t.dtype == dtype
            assert t.numpy().dtype == np_dtype
            np.testing.assert_array_equal(t.numpy(), a)
    assert flow.from_numpy(_rand(2)).type() == "oneflow.ComplexFloatTensor"


def test_python_numbers_and_lists():
    t = flow.tensor(1 + 2j)
    assert t.dtype == flow.complex64 and t.shape == () and t.item() == 1 + 2j
    t = flow.tensor([[1.5, 2j], [3, -1 - 1j]])
    assert t.dtype == flow.complex64
    assert t.tolist() == [[1.5 + 0j, 2j], [3 + 0j, -1 - 1j]]
    assert flow.tensor([1, 2], dtype=flow.cdouble).numpy().dtype == np.complex128
    assert flow.tensor([1 + 1j], dtype=flow.complex128).dtype == flow.complex128


def test_full_ones_zeros_and_casts():
    c = flow.full((3, 2), 3.14 + 2j, dtype=flow.cfloat)
    _close(c, np.full((3, 2), 3.14 + 2j, np.complex64))
    _close(flow.ones(2, dtype=flow.cdouble), np.ones(2, np.complex128))
    x = flow.tensor([1.5, -2.0])
    z = x.to(flow.complex64)
    _close(z, np.array([1.5, -2.0], np.complex64))
    # complex -> real keeps the real part, as numpy's and PyTorch's casts
    _close(flow.tensor([1 + 2j, -3 - 4j]).to(flow.float64), np.array([1.0, -3.0]))


def test_printing_follows_pytorch():
    for v in ([1 + 2j, -3.5 - 1j], [[0.25j, 1], [2, 3 + 1e-5j]], 2 - 1j):
        ours = repr(flow.tensor(v))
        theirs = repr(torch.tensor(v))
        assert ours == theirs[:-1] + ", dtype=oneflow.complex64)", (ours, theirs)


# ---------------------------------------------------------------- views and complex functions


def test_real_imag_are_views():
    z = flow.tensor(_rand(2, 3))
    re, im = z.real(), z.imag()
    assert re.dtype == flow.float32 and im.dtype == flow.float32
    _close(re, z.numpy().real)
    _close(im, z.numpy().imag)
    pairs = flow.view_as_real(z)
    assert pairs.shape == (2, 3, 2)
    pairs[0, 0, 1] = 7.0  # writes z's memory
    assert z[0, 0].item().imag == 7.0 and im[0, 0].item() == 7.0
    assert flow.real(flow.tensor([1.0])).dtype == flow.float32  # a real tensor is itself
    with pytest.raises(RuntimeError, match="imag: expected a complex tensor, got float32"):
        flow.imag(flow.tensor([1.0]))


def test_real_of_a_tensor_autograd_follows_is_a_copy_and_gradients_stay_right():
    a = _rand(3, seed=16)
    x = flow.tensor(a, requires_grad=True)
    y = x * 2
    r = y.real()
    r.mul_(3)  # a copy: y keeps its values and its history
    _close(y.detach(), 2 * a)
    y.abs().sum().backward()
    tx = torch.tensor(a, requires_grad=True)
    (tx * 2).abs().sum().backward()
    _close(x.grad, tx.grad)
    with flow.no_grad():
        assert flow.view_as_real(y).mul_(1).dtype == flow.float32  # untracked: a view again


def test_view_as_complex_and_complex():
    x = np.random.RandomState(1).randn(4, 2).astype(np.float32)
    z = flow.view_as_complex(flow.tensor(x))
    _close(z, x[:, 0] + 1j * x[:, 1])
    # pairs that are not adjacent in memory give a copy with the same values
    zt = flow.view_as_complex(flow.tensor(x.T.copy()).T)
    _close(zt, x[:, 0] + 1j * x[:, 1])
    with pytest.raises(RuntimeError, match="view_as_complex: expected a last dim of size 2"):
        flow.view_as_complex(flow.zeros(3, 3))
    c = flow.complex(flow.tensor([1.0, 2.0]), flow.tensor(3.0, dtype=flow.float64))
    assert c.dtype == flow.complex128
    _close(c, np.array([1 + 3j, 2 + 3j]))


def test_conj_angle_abs_against_numpy():
    a = _rand(3, 4)
    z = flow.tensor(a)
    _close(z.conj(), a.conj())
    _close(flow.conj_physical(z), a.conj())
    _close(flow.angle(z), np.angle(a))
    _close(z.abs(), np.abs(a))
    _close(flow.angle(flow.tensor([-1.0, 2.0])), np.array([np.pi, 0.0], np.float32))


# ---------------------------------------------------------------- arithmetic against numpy


@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_binary_ops_with_broadcasting_and_real_operands(np_dtype):
    a, b = _rand(3, 4, dtype=np_dtype, seed=2), _rand(4, dtype=np_dtype, seed=3)
    r = np.random.RandomState(4).uniform(1, 2, (3, 1)).astype(np.float32)
    x, y, w = flow.tensor(a), flow.tensor(b), flow.tensor(r)
    tol = 1e-5 if np_dtype == np.complex64 else 1e-10
    for got, want in ((x + y, a + b), (x - y, a - b), (x * y, a * b), (x / y, a / b),
                      (x * w, a * r), (w - x, r - a), (x / w, a / r), (x + 2, a + 2),
                      (x * 1j, a * 1j), (3 - x, 3 - a), (x ** 2, a ** 2), (x ** y, a ** b)):
        assert got.dtype == x.dtype
        _close(got, want.astype(np_dtype), tol=tol * 10)
    assert (x == x).all().item() and not (x != x).any().item()
    _close(x == flow.tensor(np.where(a.real > 0, a, a + 1j)), a.real > 0)
    _close(x != flow.tensor(np.where(a.real > 0, a, a + 1j)), a.real <= 0)


def test_unary_ops_and_reductions():
    a = _rand(2, 3, 4, seed=5)
    z = flow.tensor(a)
    _close(-z, -a)
    _close(flow.exp(z), np.exp(a), tol=1e-4)
    _close(flow.log(z), np.log(a), tol=1e-4)
    _close(flow.sqrt(z), np.sqrt(a), tol=1e-4)
    _close(flow.square(z), a * a, tol=1e-4)
    _close(flow.reciprocal(z), 1 / a, tol=1e-4)
    _close(z.sum(), a.sum(), tol=1e-4)
    _close(z.sum(dim=-1), a.sum(-1), tol=1e-4)
    _close(z.sum(dim=(0, 2), keepdim=True), a.sum((0, 2), keepdims=True), tol=1e-4)
    _close(z.mean(1), a.mean(1), tol=1e-4)
    _close(flow.tensor(1 + 1j).sum(), np.complex64(1 + 1j))


def test_matmul_against_numpy():
    a, b, v = _rand(2, 3, 4, seed=6), _rand(4, 5, seed=7), _rand(4, seed=8)
    _close(flow.matmul(flow.tensor(a), flow.tensor(b)), a @ b, tol=1e-4)
    _close(flow.tensor(a) @ flow.tensor(v), a @ v, tol=1e-4)
    _close(flow.tensor(v) @ flow.tensor(v), v @ v, tol=1e-4)


def test_copy_ops_are_dtype_generic():
    a = _rand(2, 3, 4, seed=9)
    z = flow.tensor(a)
    _close(z.reshape(6, 4), a.reshape(6, 4))
    _close(z.transpose(0, 2), a.transpose(2, 1, 0))
    _close(z.permute(1, 0, 2).contiguous(), a.transpose(1, 0, 2))
    _close(flow.cat([z, z], dim=1), np.concatenate([a, a], 1))
    _close(flow.stack([z[0], z[1]]), a)
    _close(z[1, ::2, 1:3], a[1, ::2, 1:3])
    _close(z.flatten(), a.reshape(-1))
    _close(z.clone(), a)
    w = flow.zeros(2, 3, dtype=flow.cfloat)
    w[0] = z[0, :, 0]
    _close(w[0], a[0, :, 0])


def test_index_flip_triangle_and_where_take_each_part():
    a = _rand(3, 4, seed=12)
    z = flow.tensor(a)
    idx = np.array([2, 0, 2])
    _close(z[flow.tensor(idx)], a[idx])
    _close(flow.index_select(z, 1, flow.tensor([3, 1])), a[:, [3, 1]])
    _close(flow.gather(z, 1, flow.tensor([[0, 0], [1, 3], [2, 1]])),
           np.take_along_axis(a, np.array([[0, 0], [1, 3], [2, 1]]), 1))
    _close(flow.flip(z, [0]), a[::-1])
    _close(flow.tril(z), np.tril(a))
    _close(flow.triu(z, 1), np.triu(a, 1))
    cond = a.real > 0
    _close(flow.where(flow.tensor(cond), z, flow.tensor(1.5)), np.where(cond, a, 1.5))
    _close(z.new_full((2, 2), 1 - 2j), np.full((2, 2), 1 - 2j, np.complex64))


def test_in_place_add_into_a_non_contiguous_view_and_its_gradient():
    a, b = _rand(2, 4, 4, seed=13), _rand(2, 2, 4, seed=14)
    grads = []
    for m in (flow, torch):
        x = m.tensor(a, requires_grad=True)
        y = (x + 1)[:, 1:3]
        y += m.tensor(b)
        y.abs().sum().backward()
        grads.append((y, x.grad))
    _close(grads[0][0].detach(), grads[1][0])
    _close(grads[0][1], grads[1][1])


# ---------------------------------------------------------------- autograd against PyTorch


def _grads(f, *arrays):
    """z.grad of the real loss f(zs).abs().sum() in flow and torch."""
    fz = [flow.tensor(a, requires_grad=True) for a in arrays]
    tz = [torch.tensor(a, requires_grad=True) for a in arrays]
    f(flow, *fz).abs().sum().backward()
    f(torch, *tz).abs().sum().backward()
    return [(x.grad, y.grad) for x, y in zip(fz, tz)]


@pytest.mark.parametrize("name,f", [
    ("add", lambda m, x, y: x + y),
    ("sub_scalar", lambda m, x, y: (x - y) * 2 - 1j),
    ("mul", lambda m, x, y: x * y),
    ("div", lambda m, x, y: x / y),
    ("exp_log", lambda m, x, y: m.exp(x) + m.log(y)),
    ("sqrt_neg", lambda m, x, y: -m.sqrt(x * y)),
    ("pow", lambda m, x, y: x ** y),
    ("sum_mean", lambda m, x, y: x.sum(0) * y.mean(1)),
    ("matmul", lambda m, x, y: m.matmul(x, y.transpose(0, 1))),
    ("conj_real", lambda m, x, y: x.conj() * y + m.real(x) if m is torch else
     x.conj() * y + x.real()),
    ("cat_slice", lambda m, x, y: m.cat([x[:, 1:], y], 1).reshape(-1)[::2]),
])
def test_gradients_match_pytorch(name, f):
    a, b = _rand(3, 3, dtype=np.complex128, seed=10), _rand(3, 3, dtype=np.complex128, seed=11)
    for got, want in _grads(f, a, b):
        assert got.dtype == flow.complex128
        _close(got, want, tol=1e-8)


def test_gradient_of_real_to_complex_cast_and_backward_of_complex_scalar():
    x = flow.tensor([1.0, -2.0], requires_grad=True)
    tx = torch.tensor([1.0, -2.0], requires_grad=True)
    (x.to(flow.complex64) * (1 + 2j)).abs().sum().backward()
    (tx.to(torch.complex64) * (1 + 2j)).abs().sum().backward()
    _close(x.grad, tx.grad)
    # OneFlow seeds a complex scalar's backward with 1 (PyTorch refuses): d re(sum z) = 1
    z = flow.tensor(_rand(2, 2), requires_grad=True)
    (z * 2).sum().backward()
    _close(z.grad, np.full((2, 2), 2, np.complex64))


def test_global_tensor_on_one_rank():
    a = _rand(4, 3, seed=15)
    p = flow.placement("cpu", [0])
    z = flow.tensor(a, placement=p, sbp=flow.sbp.broadcast, requires_grad=True)
    y = (z * z).sum(0)
    _close(y.to_local(), (a * a).sum(0), tol=1e-4)
    tz = torch.tensor(a, requires_grad=True)
    y.abs().sum().backward()
    (tz * tz).sum(0).abs().sum().backward()
    _close(z.grad.to_local(), tz.grad, tol=1e-4)


# ---------------------------------------------------------------- refusals


def test_ops_without_complex_support_refuse_in_one_line():
    z = flow.tensor([1 + 1j])
    for call, op in ((lambda: flow.sin(z), "sin"), (lambda: flow.relu(z), "relu"),
                     (lambda: flow.max(z), "max"), (lambda: z < z, "lt"),
                     (lambda: flow.randn(2, dtype=flow.complex64), "normal")):
        with pytest.raises(RuntimeError) as e:
            call()
        msg = str(e.value)
        assert "\n" not in msg and "does not support complex dtypes" in msg and "complex64" in msg
        assert msg.startswith(op) or f"{op}:" in msg, msg


# ---------------------------------------------------------------- the stand-in CUDA device

_FAKE_CUDA = r"""
import numpy as np
import oneflow as flow
a = (np.arange(6).reshape(2, 3) + 1j * np.arange(6, 12).reshape(2, 3)).astype(np.complex64)
z = flow.tensor(a, device="cuda", requires_grad=True)
y = (z * z.conj() + flow.exp(z / 10)).sum(1) @ flow.ones(2, dtype=flow.cfloat, device="cuda")
assert y.device.type == "cuda" and y.dtype == flow.complex64
want = (a * a.conj() + np.exp(a / 10)).sum(1).sum()
assert np.allclose(y.numpy(), want, rtol=1e-5), (y.numpy(), want)
y.abs().backward()
assert z.grad.device.type == "cuda" and z.grad.dtype == flow.complex64
print(z.real().cpu().numpy().tolist(), "fake cuda ok")
"""


def test_on_the_stand_in_cuda_device():
    env = dict(os.environ, ONEFLOW_FAKE_CUDA="1")
    r = subprocess.run([sys.executable, "-c", _FAKE_CUDA], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.strip().endswith("fake cuda ok")
