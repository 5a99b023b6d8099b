"""The core Tensor API as a PyTorch/OneFlow user meets it: creation, dtypes and type promotion,
operators and methods (forward and gradient compared with PyTorch on random inputs), indexing,
conversions to Python and numpy, and the messages of common user errors.

Comparisons with PyTorch skip when torch is not installed; everything checked against
hand-computed values runs without it."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import oneflow as flow
import oneflow.nn.functional as F


def _torch():
    return pytest.importorskip("torch")


@pytest.fixture
def torch():
    return _torch()


def _np(t):
    return t.detach().numpy()


def _tnp(t):
    return t.detach().numpy()


def _dtype_name(dt):
    """'float32' for oneflow.float32 and torch.float32 alike."""
    return str(dt).split(".")[-1]


def _assert_same(f, t, rtol=1e-5, atol=1e-5):
    """A oneflow tensor and a torch tensor hold the same shape, dtype and values."""
    assert tuple(f.shape) == tuple(t.shape)
    assert _dtype_name(f.dtype) == _dtype_name(t.dtype)
    if f.dtype.is_floating_point:
        np.testing.assert_allclose(_np(f), _tnp(t), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(_np(f), _tnp(t))


def _random(shape, low, high, seed):
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(np.float32)


def _compare(torch, fn, specs, grad=True, seed=0, rtol=1e-5, atol=1e-5):
    """Calls fn(flow, *xs) and fn(torch, *xs) on the same random float32 inputs; specs holds one
    shape, or (shape, low, high), per input. Compares the outputs, then backpropagates one
    random upstream gradient through both and compares every input's gradient."""
    arrays = []
    for i, spec in enumerate(specs):
        shape, low, high = (spec, -2.0, 2.0) if not isinstance(spec[-1], float) else spec
        arrays.append(_random(shape, low, high, seed + i))
    fx = [flow.tensor(a, requires_grad=grad) for a in arrays]
    tx = [torch.tensor(a, requires_grad=grad) for a in arrays]
    fy, ty = fn(flow, *fx), fn(torch, *tx)
    _assert_same(fy, ty, rtol, atol)
    if grad:
        g = np.asarray(np.random.default_rng(seed + 100).standard_normal(tuple(ty.shape)), np.float32)
        fy.backward(flow.tensor(g))
        ty.backward(torch.tensor(g))
        for i, (a, b) in enumerate(zip(fx, tx)):
            assert a.grad is not None, f"input {i} got no gradient"
            np.testing.assert_allclose(_np(a.grad), _tnp(b.grad), rtol=rtol, atol=atol,
                                       err_msg=f"gradient of input {i}")


# =============================================================== creation


def test_tensor_from_nested_int_lists_is_int64():
    t = flow.tensor([[1, 2, 3], [4, 5, 6]])
    assert t.dtype == flow.int64
    assert t.shape == (2, 3)
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_tensor_from_nested_float_lists_is_float32():
    t = flow.tensor([[1.5, 2.0], [-3.25, 4.0]])
    assert t.dtype == flow.float32
    assert t.tolist() == [[1.5, 2.0], [-3.25, 4.0]]


def test_tensor_from_bool_lists_is_bool():
    t = flow.tensor([[True, False], [False, True]])
    assert t.dtype == flow.bool
    assert t.tolist() == [[True, False], [False, True]]


def test_mixed_lists_take_the_widest_kind():
    assert flow.tensor([1, 2.5]).dtype == flow.float32
    assert flow.tensor([True, 2]).dtype == flow.int64
    assert flow.tensor([1, 2.5]).tolist() == [1.0, 2.5]


def test_python_scalars_make_zero_dim_tensors():
    for value, dtype in ((3, flow.int64), (2.5, flow.float32), (True, flow.bool)):
        t = flow.tensor(value)
        assert t.ndim == 0 and t.shape == () and t.dtype == dtype
        assert t.item() == value


def test_tensor_takes_tuples_and_dtype_and_requires_grad():
    t = flow.tensor((1, 2), dtype=flow.float64, requires_grad=True)
    assert t.dtype == flow.float64 and t.requires_grad and t.is_leaf
    assert flow.tensor([1.7, -2.7], dtype=flow.int32).tolist() == [1, -2]


def test_empty_list_is_float32_as_in_pytorch():
    t = flow.tensor([])
    assert t.shape == (0,)
    assert t.dtype == flow.float32


def test_list_of_tensors():
    losses = [flow.tensor(1.5), flow.tensor(2.5)]  # e.g. collected per-batch losses
    t = flow.tensor(losses)
    assert t.dtype == flow.float32 and t.tolist() == [1.5, 2.5]
    t = flow.tensor([flow.tensor([1, 2]), flow.tensor([3, 4])])
    assert t.dtype == flow.int64 and t.tolist() == [[1, 2], [3, 4]]
    assert flow.tensor([flow.tensor(True), False]).dtype == flow.bool
    assert flow.tensor([[flow.tensor(1.0, requires_grad=True), 2.0]]).tolist() == [[1.0, 2.0]]


def test_list_of_numpy_scalars():
    t = flow.tensor([np.float32(2.5), np.float32(1.0)])
    assert t.dtype == flow.float32 and t.tolist() == [2.5, 1.0]
    assert flow.tensor([np.int64(3), np.int64(4)]).tolist() == [3, 4]


def test_ragged_lists_are_rejected():
    with pytest.raises(RuntimeError, match="rectangular"):
        flow.tensor([[1, 2], [3]])


@pytest.mark.parametrize(
    "np_dtype, dtype",
    [
        (np.bool_, flow.bool),
        (np.uint8, flow.uint8),
        (np.int8, flow.int8),
        (np.int32, flow.int32),
        (np.int64, flow.int64),
        (np.float16, flow.float16),
        (np.float32, flow.float32),
        (np.float64, flow.float64),
    ],
)
def test_tensor_from_numpy_keeps_the_dtype(np_dtype, dtype):
    a = np.array([[0, 1, 2], [3, 4, 5]]).astype(np_dtype)
    t = flow.tensor(a)
    assert t.dtype == dtype
    assert t.shape == (2, 3)
    back = t.numpy()
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)
    np.testing.assert_array_equal(flow.from_numpy(a).numpy(), a)
    np.testing.assert_array_equal(flow.as_tensor(a).numpy(), a)


def test_tensor_from_non_contiguous_numpy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(flow.tensor(a.T).numpy(), a.T)
    np.testing.assert_array_equal(flow.tensor(a[::2, 1::2]).numpy(), a[::2, 1::2])


def test_tensor_copies_its_numpy_data():
    a = np.zeros(3, dtype=np.float32)
    t = flow.tensor(a)
    a[0] = 5.0
    assert t.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("make", [flow.zeros, flow.ones, flow.empty, flow.rand, flow.randn])
def test_size_as_varargs_tuple_list_or_size(make):
    for args in ((2, 3), ((2, 3),), ([2, 3],), (flow.Size([2, 3]),)):
        t = make(*args)
        assert t.shape == (2, 3), args
        assert t.dtype == flow.float32
        assert not t.requires_grad


@pytest.mark.parametrize("make", [flow.zeros, flow.ones, flow.empty, flow.rand, flow.randn])
def test_creation_dtype_and_requires_grad_kwargs(make):
    t = make(2, 3, dtype=flow.float64, requires_grad=True)
    assert t.dtype == flow.float64 and t.requires_grad and t.is_leaf


def test_zeros_ones_values():
    assert flow.zeros(2, 2).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert flow.ones(3, dtype=flow.int32).tolist() == [1, 1, 1]
    assert flow.ones(3, dtype=flow.int32).dtype == flow.int32
    assert flow.zeros(2, dtype=flow.bool).tolist() == [False, False]
    assert flow.zeros(0).shape == (0,)
    assert flow.ones(()).shape == ()


def test_full_infers_its_dtype_from_the_fill_value():
    assert flow.full((2, 3), 7).dtype == flow.int64
    assert flow.full((2, 3), 7).tolist() == [[7, 7, 7], [7, 7, 7]]
    assert flow.full((2,), 1.5).dtype == flow.float32
    assert flow.full((2,), True).dtype == flow.bool
    assert flow.full([2], 3, dtype=flow.float64).tolist() == [3.0, 3.0]
    assert flow.full((2,), 0.5, requires_grad=True).requires_grad


def test_like_constructors():
    x = flow.zeros(2, 3, dtype=flow.float64)
    assert flow.ones_like(x).tolist() == [[1.0] * 3] * 2 and flow.ones_like(x).dtype == flow.float64
    assert flow.zeros_like(x, dtype=flow.int32).dtype == flow.int32
    assert flow.full_like(x, 4).tolist() == [[4.0] * 3] * 2
    assert flow.rand_like(x).shape == (2, 3)
    assert flow.randn_like(x).dtype == flow.float64


def test_arange():
    assert flow.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert flow.arange(5).dtype == flow.int64
    assert flow.arange(2, 8, 3).tolist() == [2, 5]
    assert flow.arange(1, 2.5, 0.5).tolist() == [1.0, 1.5, 2.0]
    assert flow.arange(1, 2.5, 0.5).dtype == flow.float32
    assert flow.arange(5, dtype=flow.float32).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert flow.arange(3, requires_grad=False, dtype=flow.float64).dtype == flow.float64


def test_arange_matches_torch(torch):
    for args in ((7,), (-3, 4), (0, 1, 0.1), (10, 0, -3), (0.5, 3)):
        _assert_same(flow.arange(*args), torch.arange(*args))


def test_eye():
    assert flow.eye(3).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    assert flow.eye(2, 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert flow.eye(2, dtype=flow.int64).dtype == flow.int64


def test_rand_is_uniform_in_0_1():
    t = flow.rand(10000)
    a = t.numpy()
    assert a.min() >= 0.0 and a.max() < 1.0
    assert abs(a.mean() - 0.5) < 0.02


def test_randn_is_standard_normal():
    a = flow.randn(20000).numpy()
    assert abs(a.mean()) < 0.03
    assert abs(a.std() - 1.0) < 0.03


def test_randint():
    t = flow.randint(3, 10, (1000,))
    assert t.dtype == flow.int64 and t.shape == (1000,)
    a = t.numpy()
    assert a.min() >= 3 and a.max() <= 9
    assert set(a.tolist()) == set(range(3, 10))
    t = flow.randint(5, (2, 3))  # randint(high, size)
    assert t.shape == (2, 3) and 0 <= t.numpy().min() and t.numpy().max() < 5
    assert flow.randint(0, 5, (3,), dtype=flow.int32).dtype == flow.int32


def test_randperm_is_a_permutation():
    t = flow.randperm(50)
    assert t.dtype == flow.int64
    assert sorted(t.tolist()) == list(range(50))
    assert t.tolist() != list(range(50))
    assert flow.randperm(4, dtype=flow.int32).dtype == flow.int32


def _random_draws():
    return (flow.rand(4).tolist(), flow.randn(2, 3).tolist(), flow.randint(0, 1000, (5,)).tolist(),
            flow.randperm(8).tolist())


def test_manual_seed_reproduces_the_same_numbers():
    flow.manual_seed(1234)
    first = _random_draws()
    flow.manual_seed(1234)
    second = _random_draws()
    assert first == second
    flow.manual_seed(4321)
    assert _random_draws() != first


def test_initial_seed_reports_the_manual_seed():
    flow.manual_seed(99)
    assert flow.initial_seed() == 99


_SEEDED_SCRIPT = (
    "import oneflow as flow\n"
    "flow.manual_seed(2024)\n"
    "print(repr((flow.rand(4).tolist(), flow.randn(2, 3).tolist(),"
    " flow.randint(0, 1000, (5,)).tolist(), flow.randperm(8).tolist())))\n"
)


def test_manual_seed_is_deterministic_across_processes():
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _SEEDED_SCRIPT], capture_output=True, text=True,
                             env=dict(os.environ), timeout=120)
        assert out.returncode == 0, out.stderr
        runs.append(out.stdout.strip())
    assert runs[0] == runs[1]
    flow.manual_seed(2024)
    assert runs[0] == repr(_random_draws())  # and equal to this process's draws


# =============================================================== dtypes

_ALL_DTYPES = [
    ("bool", 1, False),
    ("uint8", 1, False),
    ("int8", 1, False),
    ("int32", 4, False),
    ("int64", 8, False),
    ("float16", 2, True),
    ("bfloat16", 2, True),
    ("float32", 4, True),
    ("float64", 8, True),
]


@pytest.mark.parametrize("name, itemsize, floating", _ALL_DTYPES)
def test_dtype_objects(name, itemsize, floating):
    dt = getattr(flow, name)
    assert repr(dt) == f"oneflow.{name}"
    assert dt.itemsize == itemsize
    assert dt.is_floating_point == floating
    t = flow.zeros(2, 3, dtype=dt)
    assert t.dtype == dt and t.element_size() == itemsize
    assert flow.ones(2).to(dt).dtype == dt


def test_dtype_aliases():
    assert flow.float is flow.float32 and flow.double is flow.float64 and flow.half is flow.float16
    assert flow.long is flow.int64 and flow.int is flow.int32
    assert flow.float32 != flow.float64
    assert flow.float32 == flow.float32


def test_conversions_between_dtypes():
    x = flow.tensor([0.0, 1.0, 2.75, 100.0, -3.5])
    assert x.to(flow.int64).tolist() == [0, 1, 2, 100, -3]  # truncation toward zero
    assert x.to(flow.int32).tolist() == [0, 1, 2, 100, -3]
    assert x.to(flow.int8).tolist() == [0, 1, 2, 100, -3]
    assert x[:4].to(flow.uint8).tolist() == [0, 1, 2, 100]
    assert x.to(flow.bool).tolist() == [False, True, True, True, True]
    assert x.to(flow.float64).tolist() == [0.0, 1.0, 2.75, 100.0, -3.5]
    assert x.long().dtype == flow.int64 and x.int().dtype == flow.int32
    assert x.double().dtype == flow.float64 and x.long().float().dtype == flow.float32
    assert x.half().dtype == flow.float16 and x.bool().dtype == flow.bool
    assert x.to(dtype=flow.int32).dtype == flow.int32
    assert x.to(flow.tensor([1])).dtype == flow.int64  # to(other) takes other's dtype
    assert x.type_as(flow.zeros(1, dtype=flow.float64)).dtype == flow.float64


def _bfloat16(values):
    """float32 -> bfloat16 -> float32 by hand: round the low 16 bits to nearest even."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32).tolist()


def test_half_precision_storage_round_trip():
    exact = [0.0, 1.0, -2.25, 0.5, 1024.0, -0.125]
    x = flow.tensor(exact)
    for dt in (flow.float16, flow.bfloat16):
        h = x.to(dt)
        assert h.dtype == dt
        assert h.float().dtype == flow.float32
        assert h.float().tolist() == exact
        assert h.tolist() == exact
    inexact = [0.1, 3.14159, -1e-3, 65504.0, 300.7]
    y = flow.tensor(inexact)
    assert y.to(flow.float16).float().tolist() == np.asarray(inexact, np.float32).astype(np.float16).astype(
        np.float32).tolist()
    assert y.to(flow.bfloat16).float().tolist() == _bfloat16(inexact)
    assert y.half().numpy().dtype == np.float16


def test_half_precision_round_trip_matches_torch(torch):
    a = _random((64,), -100.0, 100.0, 3)
    for dt in ("float16", "bfloat16"):
        f = flow.tensor(a).to(getattr(flow, dt)).float()
        t = torch.tensor(a).to(getattr(torch, dt)).float()
        assert f.tolist() == t.tolist(), dt


_PROMOTION_CASES = [
    # (name, oneflow result, expected dtype, expected values)
    ("int64 tensor + float scalar", lambda m: m.tensor([1, 2]) + 2.5, "float32", [3.5, 4.5]),
    ("float scalar + int64 tensor", lambda m: 2.5 + m.tensor([1, 2]), "float32", [3.5, 4.5]),
    ("float32 tensor + float scalar", lambda m: m.tensor([1.0, 2.0]) + 2.5, "float32", [3.5, 4.5]),
    ("int64 / int64", lambda m: m.tensor([1, 2]) / m.tensor([2, 2]), "float32", [0.5, 1.0]),
    ("int64 / int scalar", lambda m: m.tensor([1, 3]) / 2, "float32", [0.5, 1.5]),
    ("int scalar / int64", lambda m: 3 / m.tensor([2, 4]), "float32", [1.5, 0.75]),
    ("int64 tensor + int scalar", lambda m: m.tensor([1, 2]) + 3, "int64", [4, 5]),
    ("int64 tensor * int scalar", lambda m: m.tensor([1, 2]) * 3, "int64", [3, 6]),
    ("int32 tensor + int scalar", lambda m: m.tensor([1, 2], dtype=m.int32) + 3, "int32", [4, 5]),
    ("int32 tensor * float scalar", lambda m: m.tensor([1, 2], dtype=m.int32) * 1.5, "float32", [1.5, 3.0]),
    ("uint8 tensor + int scalar", lambda m: m.tensor([1, 2], dtype=m.uint8) + 3, "uint8", [4, 5]),
    ("float64 tensor + float scalar", lambda m: m.tensor([1.0], dtype=m.float64) + 0.5, "float64", [1.5]),
    ("float32 + int64 tensors", lambda m: m.tensor([1.5]) + m.tensor([2]), "float32", [3.5]),
    ("float32 + float64 tensors", lambda m: m.tensor([1.5]) + m.tensor([2.0], dtype=m.float64), "float64",
     [3.5]),
    ("int32 + int64 tensors", lambda m: m.tensor([1], dtype=m.int32) + m.tensor([2]), "int64", [3]),
    ("float32 tensor + 0-dim float64", lambda m: m.tensor([1.5]) + m.tensor(2.0, dtype=m.float64), "float32",
     [3.5]),
    ("int64 tensor + 0-dim float64", lambda m: m.tensor([1]) + m.tensor(2.5, dtype=m.float64), "float64",
     [3.5]),
    ("int64 tensor + 0-dim int32", lambda m: m.tensor([1]) + m.tensor(2, dtype=m.int32), "int64", [3]),
    ("bool tensor + int scalar", lambda m: m.tensor([True, False]) + 1, "int64", [2, 1]),
    ("bool tensor * float scalar", lambda m: m.tensor([True, False]) * 2.5, "float32", [2.5, 0.0]),
    ("int64 tensor ** 2", lambda m: m.tensor([1, 2, 3]) ** 2, "int64", [1, 4, 9]),
    ("2 ** int64 tensor", lambda m: 2 ** m.tensor([1, 2, 3]), "int64", [2, 4, 8]),
    ("int64 tensor ** 0.5", lambda m: m.tensor([1, 4]) ** 0.5, "float32", [1.0, 2.0]),
    ("int64 tensor < float scalar", lambda m: m.tensor([1, 2, 3]) < 2.5, "bool", [True, True, False]),
    ("float32 tensor == int scalar", lambda m: m.tensor([1.0, 2.0]) == 2, "bool", [False, True]),
    ("int64 // int scalar", lambda m: m.tensor([-7, 7]) // 2, "int64", [-4, 3]),
    ("float32 // float scalar", lambda m: m.tensor([-7.0, 7.5]) // 2.0, "float32", [-4.0, 3.0]),
    ("where int64, int scalar", lambda m: m.where(m.tensor([True, False]), m.tensor([1, 2]), 0), "int64",
     [1, 0]),
    ("cat int64 with float32", lambda m: m.cat([m.tensor([1]), m.tensor([2.5])]), "float32", [1.0, 2.5]),
    ("sum of int32", lambda m: m.tensor([1, 2], dtype=m.int32).sum(), "int64", 3),
    ("sum of bool", lambda m: m.tensor([True, True, False]).sum(), "int64", 2),
]


@pytest.mark.parametrize("name, fn, dtype, values", _PROMOTION_CASES, ids=[c[0] for c in _PROMOTION_CASES])
def test_type_promotion(name, fn, dtype, values):
    r = fn(flow)
    assert _dtype_name(r.dtype) == dtype
    assert r.tolist() == values


@pytest.mark.parametrize("name, fn, dtype, values", _PROMOTION_CASES, ids=[c[0] for c in _PROMOTION_CASES])
def test_type_promotion_matches_torch(torch, name, fn, dtype, values):
    ref = fn(torch)
    assert _dtype_name(ref.dtype) == dtype
    assert ref.tolist() == values


# =============================================================== operators

# (name, fn(m, *inputs), input specs); every fn runs with m = oneflow and m = torch.
_BINARY = [
    ("add", lambda m, a, b: a + b, [(3, 4), (3, 4)]),
    ("add broadcast", lambda m, a, b: a + b, [(3, 1, 4), (2, 4)]),
    ("sub broadcast", lambda m, a, b: a - b, [(2, 3), (3,)]),
    ("mul broadcast", lambda m, a, b: a * b, [(4, 1), (1, 5)]),
    ("div broadcast", lambda m, a, b: a / b, [(2, 3), ((2, 1), 0.5, 2.0)]),
    ("pow tensors", lambda m, a, b: a ** b, [((2, 3), 0.5, 2.0), (3,)]),
    ("maximum", lambda m, a, b: m.maximum(a, b), [(2, 3), (2, 3)]),
    ("minimum", lambda m, a, b: m.minimum(a, b), [(2, 3), (3,)]),
    ("functional add", lambda m, a, b: m.add(a, b), [(2, 3), (2, 3)]),
    ("functional sub", lambda m, a, b: m.sub(a, b), [(2, 3), (1, 3)]),
    ("functional mul", lambda m, a, b: m.mul(a, b), [(2, 3), (2, 3)]),
    ("functional div", lambda m, a, b: m.div(a, b), [(2, 3), ((2, 3), 0.5, 2.0)]),
    ("method add", lambda m, a, b: a.add(b), [(2, 3), (2, 3)]),
    ("method sub", lambda m, a, b: a.sub(b), [(2, 3), (2, 3)]),
    ("method mul", lambda m, a, b: a.mul(b), [(2, 3), (3,)]),
    ("method div", lambda m, a, b: a.div(b), [(2, 3), ((2, 3), 0.5, 2.0)]),
    ("method pow", lambda m, a, b: a.pow(b), [((2, 3), 0.5, 2.0), (2, 3)]),
    ("matmul 2d", lambda m, a, b: a @ b, [(2, 3), (3, 4)]),
    ("matmul batched broadcast", lambda m, a, b: a @ b, [(5, 1, 3, 4), (2, 4, 6)]),
    ("matmul 3d @ 2d", lambda m, a, b: a @ b, [(2, 3, 4), (4, 5)]),
    ("matmul 1d @ 1d", lambda m, a, b: a @ b, [(4,), (4,)]),
    ("matmul 2d @ 1d", lambda m, a, b: a @ b, [(3, 4), (4,)]),
    ("matmul 1d @ 2d", lambda m, a, b: a @ b, [(3,), (3, 4)]),
    ("matmul function", lambda m, a, b: m.matmul(a, b), [(2, 3), (3, 4)]),
    ("matmul method", lambda m, a, b: a.matmul(b), [(2, 3), (3, 4)]),
    ("mm method", lambda m, a, b: a.mm(b), [(2, 3), (3, 4)]),
    ("matmul transposed views", lambda m, a, b: a.t() @ b.transpose(0, 1), [(3, 2), (4, 3)]),
]


@pytest.mark.parametrize("name, fn, specs", _BINARY, ids=[c[0] for c in _BINARY])
def test_binary_ops_match_torch(torch, name, fn, specs):
    _compare(torch, fn, specs, atol=1e-4)


_SCALAR = [
    ("x + 2", lambda m, x: x + 2),
    ("2 + x", lambda m, x: 2 + x),
    ("x + 1.5", lambda m, x: x + 1.5),
    ("x - 3", lambda m, x: x - 3),
    ("3 - x", lambda m, x: 3 - x),
    ("0.5 - x", lambda m, x: 0.5 - x),
    ("x * 3", lambda m, x: x * 3),
    ("2.5 * x", lambda m, x: 2.5 * x),
    ("x / 4", lambda m, x: x / 4),
    ("3 / x", lambda m, x: 3 / x),
    ("x ** 2", lambda m, x: x ** 2),
    ("x ** 3", lambda m, x: x ** 3),
    ("x ** 0.5", lambda m, x: x ** 0.5),
    ("x ** -1", lambda m, x: x ** -1),
    ("2 ** x", lambda m, x: 2 ** x),
    ("1.5 ** x", lambda m, x: 1.5 ** x),
    ("-x", lambda m, x: -x),
    ("abs(x)", lambda m, x: abs(x)),
    ("x.abs()", lambda m, x: x.abs()),
    ("flow.abs(x)", lambda m, x: m.abs(x)),
    ("x.neg()", lambda m, x: x.neg()),
    ("x.square()", lambda m, x: x.square()),
    ("x.pow(2)", lambda m, x: x.pow(2)),
    ("flow.pow(x, 3)", lambda m, x: m.pow(x, 3)),
    ("x.add(1)", lambda m, x: x.add(1)),
    ("x.mul(2.5)", lambda m, x: x.mul(2.5)),
    ("chained", lambda m, x: (2 * x + 1) / (x * x + 1) - x ** 2 / 3),
]


@pytest.mark.parametrize("name, fn", _SCALAR, ids=[c[0] for c in _SCALAR])
def test_python_scalars_on_both_sides_match_torch(torch, name, fn):
    _compare(torch, fn, [((3, 4), 0.5, 2.0)])


def test_scalar_operators_by_hand():
    x = flow.tensor([1.0, 2.0, 4.0])
    assert (x + 1).tolist() == [2.0, 3.0, 5.0]
    assert (1 - x).tolist() == [0.0, -1.0, -3.0]
    assert (x * 0.5).tolist() == [0.5, 1.0, 2.0]
    assert (8 / x).tolist() == [8.0, 4.0, 2.0]
    assert (x ** 2).tolist() == [1.0, 4.0, 16.0]
    assert (2 ** x).tolist() == [2.0, 4.0, 16.0]
    assert (-x).tolist() == [-1.0, -2.0, -4.0]
    assert abs(flow.tensor([-1.5, 2.0])).tolist() == [1.5, 2.0]
    assert abs(flow.tensor([-3, 2])).tolist() == [3, 2]
    m = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert (m @ m).tolist() == [[7.0, 10.0], [15.0, 22.0]]
    assert (flow.tensor([[1, 2], [3, 4]]) @ flow.tensor([[1], [1]])).tolist() == [[3], [7]]


_COMPARE = [
    ("lt", lambda m, a, b: a < b),
    ("le", lambda m, a, b: a <= b),
    ("gt", lambda m, a, b: a > b),
    ("ge", lambda m, a, b: a >= b),
    ("eq", lambda m, a, b: a == b),
    ("ne", lambda m, a, b: a != b),
    ("lt scalar", lambda m, a, b: a < 0.5),
    ("scalar lt", lambda m, a, b: 0.5 < a),
    ("ge int scalar", lambda m, a, b: a >= 1),
    ("eq method", lambda m, a, b: a.eq(b)),
    ("gt function", lambda m, a, b: m.gt(a, b)),
    ("logical_not", lambda m, a, b: (a > b).logical_not()),
    ("~ and &", lambda m, a, b: ~(a > 0) & (b > 0)),
    ("|", lambda m, a, b: (a > 1) | (b < 0)),
]


@pytest.mark.parametrize("name, fn", _COMPARE, ids=[c[0] for c in _COMPARE])
def test_comparisons_match_torch(torch, name, fn):
    a = np.round(_random((4, 5), -2.0, 2.0, 1))
    b = np.round(_random((5,), -2.0, 2.0, 2))  # rounded: some entries are equal
    f = fn(flow, flow.tensor(a), flow.tensor(b))
    t = fn(torch, torch.tensor(a), torch.tensor(b))
    assert f.dtype == flow.bool
    _assert_same(f, t)


def test_comparisons_by_hand():
    x = flow.tensor([1.0, 2.0, 3.0])
    assert (x < 2).tolist() == [True, False, False]
    assert (x >= 2).tolist() == [False, True, True]
    assert (x == flow.tensor([1.0, 0.0, 3.0])).tolist() == [True, False, True]
    assert (2 < x).tolist() == [False, False, True]
    assert (x != 2).tolist() == [True, False, True]


_REDUCE = [
    ("sum all", lambda m, x: x.sum()),
    ("sum dim", lambda m, x: x.sum(dim=1)),
    ("sum positional dim", lambda m, x: x.sum(1)),
    ("sum neg dim keepdim", lambda m, x: x.sum(dim=-1, keepdim=True)),
    ("sum dims tuple", lambda m, x: x.sum(dim=(0, 2))),
    ("sum dims tuple keepdim", lambda m, x: x.sum((0, 2), keepdim=True)),
    ("flow.sum", lambda m, x: m.sum(x, dim=0)),
    ("mean all", lambda m, x: x.mean()),
    ("mean dim", lambda m, x: x.mean(dim=1)),
    ("mean dim keepdim", lambda m, x: x.mean(-1, keepdim=True)),
    ("mean dims", lambda m, x: x.mean(dim=(0, 1))),
    ("flow.mean", lambda m, x: m.mean(x)),
    ("max all", lambda m, x: x.max()),
    ("min all", lambda m, x: x.min()),
    ("flow.max all", lambda m, x: m.max(x)),
    ("max dim values", lambda m, x: x.max(dim=1)[0]),
    ("max dim .values keepdim", lambda m, x: x.max(dim=2, keepdim=True).values),
    ("min dim values", lambda m, x: x.min(1)[0]),
    ("min dim .values keepdim", lambda m, x: x.min(0, keepdim=True).values),
    ("flow.max dim", lambda m, x: m.max(x, dim=-1)[0]),
    ("flow.max(x, other)", lambda m, x: m.max(x, x * 0.5)),
]


@pytest.mark.parametrize("name, fn", _REDUCE, ids=[c[0] for c in _REDUCE])
def test_reductions_match_torch(torch, name, fn):
    _compare(torch, fn, [(2, 3, 4)])


_ARG = [
    ("argmax all", lambda m, x: x.argmax()),
    ("argmax dim", lambda m, x: x.argmax(dim=1)),
    ("argmax dim keepdim", lambda m, x: x.argmax(dim=-1, keepdim=True)),
    ("argmin dim", lambda m, x: x.argmin(dim=0)),
    ("flow.argmax", lambda m, x: m.argmax(x, dim=2)),
    ("max dim indices", lambda m, x: x.max(dim=1)[1]),
    ("max dim .indices keepdim", lambda m, x: x.max(1, keepdim=True).indices),
    ("min dim indices", lambda m, x: x.min(dim=2).indices),
]


@pytest.mark.parametrize("name, fn", _ARG, ids=[c[0] for c in _ARG])
def test_arg_reductions_match_torch(torch, name, fn):
    _compare(torch, fn, [(2, 3, 4)], grad=False)


def test_reductions_by_hand():
    x = flow.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    assert x.sum().item() == 22.0
    assert x.sum(dim=0).tolist() == [8.0, 5.0, 9.0]
    assert x.sum(dim=1, keepdim=True).tolist() == [[8.0], [14.0]]
    assert x.mean(dim=1).tolist() == [pytest.approx(8 / 3), pytest.approx(14 / 3)]
    values, indices = x.max(dim=1)
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]  # the first maximum wins
    assert x.min(dim=0).values.tolist() == [1.0, 0.0, 2.0]
    assert x.max().item() == 7.0 and x.min().item() == 0.0
    assert x.argmax().item() == 3
    assert x.argmax(dim=1).tolist() == [1, 0]
    assert x.argmax(dim=1, keepdim=True).shape == (2, 1)
    assert flow.tensor([[1, 2], [3, 4]]).sum(dim=0).tolist() == [4, 6]


def test_max_all_gradient_splits_ties_evenly_as_in_torch(torch):
    x = flow.tensor([1.0, 3.0, 3.0], requires_grad=True)
    x.max().backward()
    t = torch.tensor([1.0, 3.0, 3.0], requires_grad=True)
    t.max().backward()
    assert t.grad.tolist() == [0.0, 0.5, 0.5]
    assert x.grad.tolist() == t.grad.tolist()


_SHAPE = [
    ("reshape varargs", lambda m, x: x.reshape(4, -1)),
    ("reshape tuple", lambda m, x: x.reshape((6, 4))),
    ("flow.reshape", lambda m, x: m.reshape(x, (2, 12))),
    ("view", lambda m, x: x.view(3, 8)),
    ("view -1", lambda m, x: x.view(-1)),
    ("view tuple", lambda m, x: x.view((2, 3, 2, 2))),
    ("permute", lambda m, x: x.permute(2, 0, 1)),
    ("permute tuple", lambda m, x: x.permute((1, 2, 0))),
    ("flow.permute", lambda m, x: m.permute(x, (2, 1, 0))),
    ("transpose", lambda m, x: x.transpose(0, 2)),
    ("transpose negative", lambda m, x: x.transpose(-1, 1)),
    ("flow.transpose", lambda m, x: m.transpose(x, 0, 1)),
    ("t", lambda m, x: x.sum(0).t()),
    ("T", lambda m, x: x.sum(0).T),
    ("flatten", lambda m, x: x.flatten()),
    ("flatten start", lambda m, x: x.flatten(1)),
    ("flatten range", lambda m, x: x.flatten(0, 1)),
    ("flow.flatten", lambda m, x: m.flatten(x, start_dim=1)),
    ("unsqueeze 0", lambda m, x: x.unsqueeze(0)),
    ("unsqueeze -1", lambda m, x: x.unsqueeze(-1)),
    ("flow.unsqueeze", lambda m, x: m.unsqueeze(x, 2)),
    ("squeeze all", lambda m, x: x.unsqueeze(0).unsqueeze(3).squeeze()),
    ("squeeze dim", lambda m, x: x.unsqueeze(1).squeeze(1)),
    ("squeeze dim of size > 1 keeps it", lambda m, x: x.squeeze(0)),
    ("expand", lambda m, x: x[:, :1].expand(2, 5, 4)),
    ("expand -1", lambda m, x: x[:1].expand(3, -1, -1)),
    ("expand new leading dims", lambda m, x: x.expand(2, 2, 3, 4)),
    ("expand tuple", lambda m, x: x[:, :, :1].expand((2, 3, 6))),
    ("expand_as", lambda m, x: x[:1].expand_as(x)),
    ("view_as", lambda m, x: x.view(24).view_as(x)),
    ("reshape of permuted", lambda m, x: x.permute(1, 0, 2).reshape(3, 8)),
    ("contiguous", lambda m, x: x.transpose(0, 1).contiguous()),
]


@pytest.mark.parametrize("name, fn", _SHAPE, ids=[c[0] for c in _SHAPE])
def test_shape_ops_match_torch(torch, name, fn):
    _compare(torch, fn, [(2, 3, 4)])


def test_shape_ops_by_hand():
    x = flow.arange(6).reshape(2, 3)
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert x.t().tolist() == [[0, 3], [1, 4], [2, 5]]
    assert x.view(3, 2).tolist() == [[0, 1], [2, 3], [4, 5]]
    assert x.permute(1, 0).shape == (3, 2)
    assert x.unsqueeze(1).shape == (2, 1, 3)
    assert x.unsqueeze(1).squeeze().shape == (2, 3)
    assert x[:1].expand(3, 3).tolist() == [[0, 1, 2]] * 3
    assert x.flatten().tolist() == [0, 1, 2, 3, 4, 5]
    assert x.size() == (2, 3) and x.size(1) == 3 and x.size(-2) == 2
    assert repr(x.shape) == "oneflow.Size([2, 3])"
    assert x.shape.numel() == 6 and x.numel() == 6 and x.dim() == 2 and x.ndim == 2


def test_view_of_a_transposed_tensor_asks_for_reshape():
    with pytest.raises(RuntimeError, match="contiguous"):
        flow.zeros(2, 3).t().view(6)


_COMBINE = [
    ("cat dim 0", lambda m, a, b: m.cat([a, b], dim=0), [(2, 3), (4, 3)]),
    ("cat dim 1", lambda m, a, b: m.cat((a, b), 1), [(2, 3), (2, 1)]),
    ("cat dim -1", lambda m, a, b: m.cat([a, b, a], dim=-1), [(2, 2), (2, 3)]),
    ("concat", lambda m, a, b: m.concat([a, b]), [(1, 3), (2, 3)]),
    ("stack dim 0", lambda m, a, b: m.stack([a, b]), [(2, 3), (2, 3)]),
    ("stack dim 1", lambda m, a, b: m.stack((a, b), dim=1), [(2, 3), (2, 3)]),
    ("stack dim -1", lambda m, a, b: m.stack([a, b], dim=-1), [(2, 3), (2, 3)]),
    ("where", lambda m, a, b: m.where(a > 0, a, b), [(2, 3), (2, 3)]),
    ("where broadcast", lambda m, a, b: m.where(b > 0, a, b), [(2, 3), (3,)]),
    ("where scalar y", lambda m, a, b: m.where(a > b, a, 0.0) + b, [(2, 3), (2, 3)]),
]


@pytest.mark.parametrize("name, fn, specs", _COMBINE, ids=[c[0] for c in _COMBINE])
def test_combining_ops_match_torch(torch, name, fn, specs):
    _compare(torch, fn, specs)


_INDEX_OPS = [
    ("index_select dim 0", lambda m, x: m.index_select(x, 0, m.tensor([2, 0, 2]))),
    ("index_select dim 1", lambda m, x: m.index_select(x, 1, m.tensor([3, 1]))),
    ("index_select kwargs", lambda m, x: m.index_select(x, dim=-1, index=m.tensor([0, 0]))),
    ("index_select method", lambda m, x: x.index_select(1, m.tensor([0, 2]))),
    ("index_select int32 index", lambda m, x: m.index_select(x, 0, m.tensor([1], dtype=m.int32))),
    ("gather dim 1", lambda m, x: m.gather(x, 1, m.tensor([[0, 3], [1, 1], [3, 2]]))),
    ("gather dim 0", lambda m, x: m.gather(x, 0, m.tensor([[2, 0, 1, 1]]))),
    ("gather kwargs", lambda m, x: m.gather(x, dim=1, index=m.tensor([[0], [1], [2]]))),
    ("gather method", lambda m, x: x.gather(1, m.tensor([[3, 3], [0, 0], [1, 2]]))),
]


@pytest.mark.parametrize("name, fn", _INDEX_OPS, ids=[c[0] for c in _INDEX_OPS])
def test_index_ops_match_torch(torch, name, fn):
    _compare(torch, fn, [(3, 4)])


def test_cat_stack_where_gather_by_hand():
    a, b = flow.tensor([[1, 2]]), flow.tensor([[3, 4]])
    assert flow.cat([a, b]).tolist() == [[1, 2], [3, 4]]
    assert flow.cat([a, b], dim=1).tolist() == [[1, 2, 3, 4]]
    assert flow.stack([a[0], b[0]], dim=1).tolist() == [[1, 3], [2, 4]]
    c = flow.tensor([True, False])
    assert flow.where(c, flow.tensor([1.0, 2.0]), flow.tensor([9.0, 8.0])).tolist() == [1.0, 8.0]
    x = flow.arange(6).reshape(2, 3)
    assert flow.gather(x, 1, flow.tensor([[2, 0], [1, 1]])).tolist() == [[2, 0], [4, 4]]
    assert flow.index_select(x, 1, flow.tensor([2, 0])).tolist() == [[2, 0], [5, 3]]
    assert x.index_select(0, flow.tensor([1])).tolist() == [[3, 4, 5]]


_UNARY = [
    ("softmax dim 1", lambda m, x: m.softmax(x, dim=1), (-3.0, 3.0)),
    ("softmax dim 0", lambda m, x: m.softmax(x, dim=0), (-3.0, 3.0)),
    ("softmax method", lambda m, x: x.softmax(dim=-1), (-3.0, 3.0)),
    ("F.softmax", lambda m, x: (F if m is flow else m.nn.functional).softmax(x, dim=1), (-3.0, 3.0)),
    ("log_softmax", lambda m, x: m.log_softmax(x, dim=1), (-3.0, 3.0)),
    ("log_softmax method", lambda m, x: x.log_softmax(-1), (-3.0, 3.0)),
    ("F.log_softmax", lambda m, x: (F if m is flow else m.nn.functional).log_softmax(x, dim=0), (-3.0, 3.0)),
    ("clamp min max", lambda m, x: x.clamp(-0.5, 0.5), (-2.0, 2.0)),
    ("clamp min", lambda m, x: x.clamp(min=0.0), (-2.0, 2.0)),
    ("clamp max", lambda m, x: m.clamp(x, max=0.3), (-2.0, 2.0)),
    ("clip", lambda m, x: x.clip(-1, 1), (-2.0, 2.0)),
    ("relu", lambda m, x: m.relu(x), (-2.0, 2.0)),
    ("relu method", lambda m, x: x.relu(), (-2.0, 2.0)),
    ("sigmoid", lambda m, x: m.sigmoid(x), (-4.0, 4.0)),
    ("sigmoid method", lambda m, x: x.sigmoid(), (-4.0, 4.0)),
    ("tanh", lambda m, x: m.tanh(x), (-3.0, 3.0)),
    ("tanh method", lambda m, x: x.tanh(), (-3.0, 3.0)),
    ("gelu", lambda m, x: (F if m is flow else m.nn.functional).gelu(x), (-3.0, 3.0)),
    ("flow.gelu", lambda m, x: m.nn.functional.gelu(x) if m is not flow else flow.gelu(x), (-3.0, 3.0)),
    ("exp", lambda m, x: m.exp(x), (-2.0, 2.0)),
    ("exp method", lambda m, x: x.exp(), (-2.0, 2.0)),
    ("log", lambda m, x: m.log(x), (0.1, 5.0)),
    ("log method", lambda m, x: x.log(), (0.1, 5.0)),
    ("sqrt", lambda m, x: m.sqrt(x), (0.1, 5.0)),
    ("sqrt method", lambda m, x: x.sqrt(), (0.1, 5.0)),
    ("rsqrt", lambda m, x: m.rsqrt(x), (0.1, 5.0)),
    ("sign", lambda m, x: m.sign(x), (-2.0, 2.0)),
    ("square", lambda m, x: m.square(x), (-2.0, 2.0)),
    ("neg", lambda m, x: m.neg(x), (-2.0, 2.0)),
    ("composite", lambda m, x: (x.exp() * x.sigmoid() + x.tanh()).log_softmax(dim=1), (-2.0, 2.0)),
]


@pytest.mark.parametrize("name, fn, bounds", _UNARY, ids=[c[0] for c in _UNARY])
def test_unary_ops_match_torch(torch, name, fn, bounds):
    _compare(torch, fn, [((3, 5),) + bounds])


def test_unary_ops_by_hand():
    x = flow.tensor([-1.0, 0.0, 2.0])
    assert x.relu().tolist() == [0.0, 0.0, 2.0]
    assert x.clamp(min=-0.5, max=1.0).tolist() == [-0.5, 0.0, 1.0]
    assert x.exp().tolist() == pytest.approx([math.exp(-1), 1.0, math.exp(2)])
    assert x.sigmoid().tolist() == pytest.approx([1 / (1 + math.e), 0.5, 1 / (1 + math.exp(-2))])
    assert x.tanh().tolist() == pytest.approx([math.tanh(-1), 0.0, math.tanh(2)])
    assert flow.gelu(x).tolist() == pytest.approx(
        [v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in (-1.0, 0.0, 2.0)], abs=1e-6)
    assert flow.tensor([1.0, 4.0]).sqrt().tolist() == [1.0, 2.0]
    assert flow.tensor([1.0, math.e]).log().tolist() == pytest.approx([0.0, 1.0])
    s = flow.tensor([[1.0, 2.0, 3.0]]).softmax(dim=1)
    e = [math.exp(v) for v in (1.0, 2.0, 3.0)]
    assert s.tolist()[0] == pytest.approx([v / sum(e) for v in e])
    assert flow.tensor([1, 5, -3]).clamp(0, 3).tolist() == [1, 3, 0]


def test_softmax_of_large_logits_does_not_overflow():
    s = flow.tensor([[1000.0, 1000.0], [-1000.0, 0.0]]).softmax(dim=1)
    assert s.tolist() == [[0.5, 0.5], [0.0, 1.0]]
    ls = flow.tensor([[1000.0, 0.0]]).log_softmax(dim=1)
    assert ls.tolist() == [[0.0, -1000.0]]


def test_integer_inputs_of_float_functions_become_float32():
    assert flow.exp(flow.tensor([0, 1])).dtype == flow.float32
    assert flow.sqrt(flow.tensor([4])).tolist() == [2.0]


# =============================================================== indexing

_INDICES = [
    ("int", 1),
    ("negative int", -1),
    ("two ints", (1, 2)),
    ("three ints", (-1, -2, 3)),
    ("slice", slice(0, 1)),
    ("slice with step", (slice(None), slice(None, None, 2))),
    ("slice start stop step", (slice(None), slice(0, 3, 2), slice(1, 4, 2))),
    ("negative slice bounds", (slice(-1, None), slice(-2, -1))),
    ("slice out of range clamps", slice(1, 100)),
    ("empty slice", (slice(None), slice(2, 1))),
    ("int and slice", (0, slice(1, None))),
    ("slice and int", (slice(None), 1)),
    ("None", None),
    ("None in the middle", (slice(None), None, 1)),
    ("Ellipsis", Ellipsis),
    ("Ellipsis then int", (Ellipsis, 1)),
    ("int then Ellipsis", (1, Ellipsis)),
    ("Ellipsis in the middle", (0, Ellipsis, -1)),
    ("Ellipsis and None", (Ellipsis, None)),
    ("list", [1, 0, 1]),
    ("list with negative", [-1, 0]),
    ("list on dim 1", (slice(None), [2, 0])),
    ("int then list", (0, [0, 2, 2])),
]


def _to_index(idx, make):
    """The same index with its lists turned into index tensors by make."""
    if isinstance(idx, tuple):
        return tuple(_to_index(i, make) for i in idx)
    return make(idx) if isinstance(idx, list) else idx


@pytest.mark.parametrize("name, idx", _INDICES, ids=[c[0] for c in _INDICES])
def test_getitem_matches_numpy(name, idx):
    a = np.arange(24).reshape(2, 3, 4)
    x = flow.tensor(a)
    want = a[idx]
    got = x[idx]
    assert tuple(got.shape) == want.shape
    assert got.dtype == flow.int64
    np.testing.assert_array_equal(got.numpy(), want)
    # Lists as int64 index tensors give the same result.
    got = x[_to_index(idx, flow.tensor)]
    np.testing.assert_array_equal(got.numpy(), want)


def test_index_tensors_of_any_shape():
    x = flow.arange(10) * 10
    assert x[flow.tensor([[1, 2], [3, -1]])].tolist() == [[10, 20], [30, 90]]
    assert x[flow.tensor([2], dtype=flow.int32)].tolist() == [20]
    m = flow.arange(12).reshape(3, 4)
    assert m[flow.tensor([2, 0])].tolist() == [[8, 9, 10, 11], [0, 1, 2, 3]]


def test_indexing_by_hand():
    x = flow.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x[1].tolist() == [4.0, 5.0, 6.0]
    assert x[-1, -1].item() == 6.0
    assert x[0, 1].ndim == 0
    assert x[:, 1].tolist() == [2.0, 5.0]
    assert x[:, ::2].tolist() == [[1.0, 3.0], [4.0, 6.0]]
    assert x[None].shape == (1, 2, 3)
    assert x[..., 0].tolist() == [1.0, 4.0]
    assert x[[1, 0]].tolist() == [[4.0, 5.0, 6.0], [1.0, 2.0, 3.0]]


def test_getitem_gradient_matches_torch(torch):
    def fn(m, x):
        return x[1:, ::2] * 2 + x[0, -1] - x[..., None][:, 0].sum()

    _compare(torch, fn, [(3, 4)])
    _compare(torch, lambda m, x: x[m.tensor([0, 0, 2])] * x[[1, 1, 2]], [(3, 4)])


def test_setitem_scalars():
    x = flow.zeros(3, 4)
    x[0] = 1.0
    x[1, 2] = 7
    x[-1, ::2] = 5.0
    assert x.tolist() == [[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 7.0, 0.0], [5.0, 0.0, 5.0, 0.0]]


def test_setitem_columns():
    x = flow.zeros(2, 3)
    x[:, 1] = 5.0
    assert x.tolist() == [[0.0, 5.0, 0.0], [0.0, 5.0, 0.0]]
    y = flow.zeros(2, 3)
    y[..., 0] = flow.tensor([1.0, 2.0])
    assert y.tolist() == [[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]
    z = flow.zeros(2, 3, 4)
    z[:, 1, 2] = 3.0
    z[1, :, -1] = flow.tensor([7.0, 8.0, 9.0])
    ref = np.zeros((2, 3, 4), np.float32)
    ref[:, 1, 2] = 3.0
    ref[1, :, -1] = [7.0, 8.0, 9.0]
    np.testing.assert_array_equal(z.numpy(), ref)


def test_setitem_tensors_on_slices_broadcast():
    x = flow.zeros(3, 3)
    x[0:2] = flow.tensor([1.0, 2.0, 3.0])
    x[2, 1:] = flow.tensor([8.0, 9.0])
    assert x.tolist() == [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.0, 8.0, 9.0]]
    y = flow.zeros(2, 4, dtype=flow.int64)
    y[:, 1:3] = flow.tensor([[1, 2], [3, 4]])
    y[..., 3] = 9
    assert y.tolist() == [[0, 1, 2, 9], [0, 3, 4, 9]]


def test_setitem_matches_numpy_on_random_indices():
    rng = np.random.default_rng(7)
    for idx in [(1,), (slice(None), 2), (Ellipsis, -1), (0, slice(1, None, 2)), (slice(None, None, 2), 1, 0),
                (None, 1), (slice(None), None, 2, slice(None))]:
        a = np.zeros((3, 4, 5), np.float32)
        view_shape = a[idx].shape
        v = rng.standard_normal(view_shape).astype(np.float32)
        a[idx] = v
        x = flow.zeros(3, 4, 5)
        x[idx] = flow.tensor(v)
        np.testing.assert_array_equal(x.numpy(), a, err_msg=str(idx))


def _random_basic_index(rng, shape):
    """A random index of ints (some negative), slices (with steps and open ends), None and at
    most one Ellipsis, valid for shape."""
    ndim = len(shape)

    def one(n):
        if rng.random() < 0.4:
            return int(rng.integers(-n, n))
        start = None if rng.random() < 0.3 else int(rng.integers(-n, n))
        stop = None if rng.random() < 0.3 else int(rng.integers(-n, n + 2))
        step = None if rng.random() < 0.4 else int(rng.integers(1, 4))
        return slice(start, stop, step)

    if rng.random() < 0.3:
        before = int(rng.integers(0, ndim + 1))
        after = int(rng.integers(0, ndim - before + 1))
        items = [one(n) for n in shape[:before]] + [Ellipsis] + [one(n) for n in shape[ndim - after:]]
    else:
        items = [one(n) for n in shape[:int(rng.integers(1, ndim + 1))]]
    for _ in range(int(rng.integers(0, 3)) if rng.random() < 0.3 else 0):
        items.insert(int(rng.integers(0, len(items) + 1)), None)
    return tuple(items)


@pytest.mark.parametrize("base", ["contiguous", "permuted", "sliced"])
def test_random_basic_indexing_matches_numpy(base):
    rng = np.random.default_rng(11)
    for trial in range(300):
        a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
        x = flow.tensor(a)
        if base == "permuted":
            a, x = a.transpose(2, 0, 1), x.permute(2, 0, 1)
        elif base == "sliced":
            a, x = a[:, 1:, ::2], x[:, 1:, ::2]
        idx = _random_basic_index(rng, a.shape)
        want = a[idx]
        got = x[idx]
        assert tuple(got.shape) == want.shape, idx
        np.testing.assert_array_equal(got.numpy(), want, err_msg=str(idx))
        # Writes: a scalar, then a tensor of the indexed shape, land where numpy puts them.
        a[idx] = -1.0
        x[idx] = -1.0
        np.testing.assert_array_equal(x.numpy(), a, err_msg=f"scalar write at {idx}")
        v = rng.standard_normal(want.shape).astype(np.float32)
        a[idx] = v
        x[idx] = flow.tensor(v)
        np.testing.assert_array_equal(x.numpy(), a, err_msg=f"tensor write at {idx}")


def test_setitem_through_a_transposed_view_writes_the_base():
    x = flow.zeros(2, 3)
    x.t()[1] = flow.tensor([4.0, 5.0])
    assert x.tolist() == [[0.0, 4.0, 0.0], [0.0, 5.0, 0.0]]


def test_setitem_value_of_the_wrong_shape_is_an_error():
    x = flow.zeros(2, 3)
    with pytest.raises(RuntimeError):
        x[:, 1] = flow.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError):
        x[0] = flow.tensor([1.0, 2.0])
    x[:, 1] = flow.tensor([[7.0, 8.0]])  # leading size-1 dims of the value are dropped, as in torch
    assert x[:, 1].tolist() == [7.0, 8.0]


def test_setitem_converts_the_value_dtype():
    x = flow.zeros(3, dtype=flow.int32)
    x[1] = 2.7
    x[2:] = flow.tensor([5.0])
    assert x.tolist() == [0, 2, 5] and x.dtype == flow.int32


# Bool masks and index tensors, read and written, against numpy (the reference for values)
# and PyTorch (gradients).
MASK_CASES = [
    ("full mask", (3, 4), lambda a: a > 0),
    ("leading dim", (3, 4), lambda a: a[:, 0] > 0),
    ("after a slice", (3, 4), lambda a: (slice(None), a[0] > 0)),
    ("middle dims", (2, 3, 4), lambda a: (slice(None), a[0] > 0)),
    ("mask then int", (3, 4), lambda a: (a[:, 0] > 0, 2)),
    ("all false", (3, 4), lambda a: a > 100),
]


@pytest.mark.parametrize("name,shape,index", MASK_CASES, ids=[c[0] for c in MASK_CASES])
def test_bool_mask_indexing_matches_numpy(name, shape, index):
    rng = np.random.default_rng(5)
    a = rng.standard_normal(shape).astype(np.float32)
    idx = index(a)
    flow_idx = tuple(flow.tensor(i) if isinstance(i, np.ndarray) else i for i in idx) \
        if isinstance(idx, tuple) else flow.tensor(idx)
    want = a[idx]
    got = flow.tensor(a)[flow_idx]
    assert tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
    # Written: a number and a tensor of the indexed shape.
    b, x = a.copy(), flow.tensor(a)
    b[idx] = -1.0
    x[flow_idx] = -1.0
    np.testing.assert_array_equal(x.numpy(), b)
    v = rng.standard_normal(want.shape).astype(np.float32)
    b[idx] = v
    x[flow_idx] = flow.tensor(v)
    np.testing.assert_array_equal(x.numpy(), b)


_A4 = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5).astype(np.float32)
ADVANCED_CASES = [
    ([0, 1],),
    (np.array([[0], [1]]), np.array([1, 2])),                 # broadcast together
    (slice(None), np.array([0, 2]), np.array([1, 3])),        # adjacent: where they stood
    (0, slice(None), np.array([1, 2])),                       # an int selects first (PyTorch)
    (np.array([0, 1]), slice(None), np.array([1, 2])),        # apart: in front
    (np.array([1, 0]), 1),
    (Ellipsis, np.array([4, 0])),
    (slice(None), np.array([[0, 1], [2, 0]]), slice(1, 3)),
    (_A4[:, :, 0, 0] > 20,),                                  # a 2-dim mask
    (slice(None), _A4[0, :, :, 0] > 30),
    (_A4[:, 0, 0, 0] > 5, slice(None), np.array([0, 3])),     # a mask with an index
    (np.array([-1, 0]), None, np.array([2])),
    (np.array([0, 1]), np.array([1, 2]), np.array([0, 3]), np.array([4, 4])),
]


@pytest.mark.parametrize("index", ADVANCED_CASES, ids=[str(i) for i in range(len(ADVANCED_CASES))])
def test_advanced_indexing_matches_torch(torch, index):
    def conv(lib):
        return tuple(lib.tensor(v) if isinstance(v, np.ndarray) else v for v in index)
    fi, ti = conv(flow), conv(torch)
    got, want = flow.tensor(_A4)[fi], torch.tensor(_A4)[ti]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    v = np.random.default_rng(0).standard_normal(tuple(want.shape)).astype(np.float32)
    for value in (-1.0, v):  # writes: a number, then a tensor of the indexed shape
        x, t = flow.tensor(_A4), torch.tensor(_A4)
        x[fi] = value if isinstance(value, float) else flow.tensor(value)
        t[ti] = value if isinstance(value, float) else torch.tensor(value)
        np.testing.assert_array_equal(x.numpy(), t.numpy())
    x, t = flow.tensor(_A4, requires_grad=True), torch.tensor(_A4, requires_grad=True)
    (x[fi] * flow.tensor(v)).sum().backward()
    (t[ti] * torch.tensor(v)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())


def test_advanced_index_out_of_range_names_the_dim():
    x = flow.zeros(2, 3, 4)
    with pytest.raises(IndexError, match="index 2 is out of bounds for dimension 0 with size 2"):
        x[flow.tensor([0, 2])]
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 1 with size 3"):
        x[0, [1, -4]]
    with pytest.raises(RuntimeError, match=r"index: shapes \(2,\) and \(3,\) cannot be broadcast"):
        x[[0, 1], [0, 1, 2]]


def test_bool_mask_from_a_list_and_integer_index_writes():
    x = flow.arange(6).reshape(2, 3)
    assert x[[True, False]].tolist() == [[0, 1, 2]]
    x[x % 2 == 0] = flow.tensor([10, 20, 30])
    assert x.tolist() == [[10, 1, 20], [3, 30, 5]]
    x[flow.tensor([1])] = 7  # an int index tensor names whole rows
    assert x.tolist() == [[10, 1, 20], [7, 7, 7]]
    y = flow.zeros(4)
    y[flow.tensor([3, 0])] = flow.tensor([5.0, 6.0])
    assert y.tolist() == [6.0, 0.0, 0.0, 5.0]


def test_bool_mask_gradient_matches_torch(torch):
    a = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    x = flow.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    ((x * x)[x > 0] * 3).sum().backward()
    ((t * t)[t > 0] * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6)


def test_masked_fill_select_nonzero_match_torch(torch):
    a = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    row = np.array([True, False, True, True])
    x, t = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    fx = x.masked_fill(x < 0, 0.5) * 2 + flow.masked_fill(x, flow.tensor(row), -1.0)
    ft = t.masked_fill(t < 0, 0.5) * 2 + torch.masked_fill(t, torch.tensor(row), -1.0)
    np.testing.assert_allclose(fx.detach().numpy(), ft.detach().numpy())
    (fx.sum() + x.masked_select(flow.tensor(row)).sum()).backward()
    (ft.sum() + t.masked_select(torch.tensor(row)).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())
    assert x.masked_select(flow.tensor(row)).shape == t.masked_select(torch.tensor(row)).shape
    m = a > 0
    assert flow.nonzero(flow.tensor(m)).tolist() == torch.nonzero(torch.tensor(m)).tolist()
    assert flow.argwhere(flow.tensor(a)).tolist() == torch.argwhere(torch.tensor(a)).tolist()
    for fw, tw in zip(flow.where(flow.tensor(m)), torch.where(torch.tensor(m))):
        assert fw.tolist() == tw.tolist()
    y = flow.zeros(2, 2)
    y.masked_fill_(flow.tensor([[True, False], [False, True]]), 3.0)
    assert y.tolist() == [[3.0, 0.0], [0.0, 3.0]]


def test_remainder_follows_python(torch):
    a = flow.tensor([-7, 7, 5, -5])
    assert (a % 3).tolist() == [v % 3 for v in [-7, 7, 5, -5]]
    assert (a % -3).tolist() == [v % -3 for v in [-7, 7, 5, -5]]
    assert (10 % flow.tensor([3, -3])).tolist() == [1, -2]
    assert (flow.tensor([50331647, 2 ** 40 + 1]) % 3).tolist() == [50331647 % 3, (2 ** 40 + 1) % 3]
    for x, y in [([-7.5, 7.5, 2.25, 1e8], 2.0), ([1e8, -1e8], 3.0), ([1.0, -1.0], 0.0)]:
        np.testing.assert_array_equal((flow.tensor(x) % y).numpy(), (torch.tensor(x) % y).numpy())
    assert (7.5 % flow.tensor([2])).tolist() == [1.5]  # promoted as PyTorch does
    with pytest.raises(RuntimeError, match="remainder: integer division by zero"):
        flow.tensor([1, 2]) % flow.tensor([1, 0])
    with pytest.raises(RuntimeError, match="remainder: not defined for bool tensors"):
        flow.tensor([True]) % flow.tensor([True])
    x, y = flow.tensor([5.5, -3.2], requires_grad=True), flow.tensor([2.0, 1.5], requires_grad=True)
    tx, ty = torch.tensor([5.5, -3.2], requires_grad=True), torch.tensor([2.0, 1.5], requires_grad=True)
    flow.remainder(x, y).sum().backward()
    torch.remainder(tx, ty).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist() and y.grad.tolist() == ty.grad.tolist()


def test_mask_and_index_write_errors_are_one_line():
    x = flow.zeros(2, 3)
    with pytest.raises(IndexError, match=r"the shape of the mask \(3,\) at index 0 does not match "
                                         r"the shape of the indexed tensor \(2, 3\)"):
        x[flow.tensor([True, False, True])]
    with pytest.raises(RuntimeError, match=r"__setitem__: a value of shape \(2,\) cannot be "
                                           r"broadcast to the indexed shape \(6,\)"):
        x[x == 0] = flow.tensor([1.0, 2.0])
    with pytest.raises(IndexError, match="tensors used as indices must be long, int or bool, got float32"):
        x[flow.tensor([0.5])]
    with pytest.raises(TypeError, match="masked_fill: expected a bool mask tensor, got oneflow.float32"):
        x.masked_fill(x, 1.0)
    with pytest.raises(ValueError, match=r"masked_fill: value must be a number or a 0-dim tensor, got shape \(2,\)"):
        x.masked_fill(x > 0, flow.ones(2))
    with pytest.raises(RuntimeError, match=r"masked_select: the mask of shape \(4,\) does not broadcast "
                                           r"with the input of shape \(2, 3\)"):
        x.masked_select(flow.ones(4).bool())
    with pytest.raises(TypeError, match=r"where: pass both x and y, or neither \(the nonzero form\)"):
        flow.where(x > 0, x)
    y = (flow.ones(3, requires_grad=True) * 2)
    with pytest.raises(RuntimeError, match="__setitem__: writing through an index tensor into a "
                                           "tensor that requires grad is not supported; use masked_fill"):
        y[y > 1] = 0.0
    w = flow.ones(1, requires_grad=True)
    for index in (flow.tensor([1]), x[0] > -1):  # the gradient would be lost: refused
        with pytest.raises(RuntimeError, match="__setitem__: the value requires grad, but writes "
                                               "through an index tensor are not recorded by autograd"):
            x[0][index] = w
    with pytest.raises(IndexError, match=r"an index can only have a single ellipsis \('...'\)"):
        x[..., ..., 0]


def test_index_tensor_forms_as_torch_reads_them(torch):
    x, t = flow.arange(5 * 6 * 7).reshape(5, 6, 7), torch.arange(5 * 6 * 7).reshape(5, 6, 7)
    # A 0-dim integer tensor is an int (it selects before the index tensors apply).
    assert x[flow.tensor(0), :, [1, 2, 3]].tolist() == t[torch.tensor(0), :, [1, 2, 3]].tolist()
    # uint8 tensors are masks.
    m = [1, 0, 1, 0, 0]
    assert x[flow.tensor(m, dtype=flow.uint8)].tolist() == x[flow.tensor(m).bool()].tolist()
    # A value with extra leading size-1 dims fits.
    z = flow.zeros(3)
    z[0] = flow.tensor([5.0])
    assert z.tolist() == [5.0, 0.0, 0.0]
    # nonzero of a 0-dim tensor.
    assert [v.tolist() for v in flow.nonzero(flow.tensor(3.0), as_tuple=True)] == [[0]]
    assert [v.tolist() for v in flow.nonzero(flow.tensor(0.0), as_tuple=True)] == [[]]


def test_row_views_share_storage():
    x = flow.zeros(3, 4)
    row = x[1]
    row.fill_(2.0)
    x[2:].add_(1.0)
    assert x.tolist() == [[0.0] * 4, [2.0] * 4, [1.0] * 4]
    x.view(-1)[0:2].fill_(7.0)
    assert x[0].tolist() == [7.0, 7.0, 0.0, 0.0]
    y = x.reshape(12)
    y.zero_()
    assert x.sum().item() == 0.0


def test_detach_and_expand_share_storage():
    x = flow.zeros(2)
    x.detach().fill_(3.0)
    assert x.tolist() == [3.0, 3.0]
    e = x.unsqueeze(0).expand(2, 2)
    assert e.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    x.fill_(1.0)
    assert e.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_column_views_share_storage():
    x = flow.zeros(2, 3)
    col = x[:, 1]
    col.fill_(5.0)
    assert x.tolist() == [[0.0, 5.0, 0.0], [0.0, 5.0, 0.0]]
    y = flow.zeros(2, 3)
    y.t().unsqueeze(0).fill_(1.0)
    assert y.sum().item() == 6.0
    z = flow.zeros(3, 4)
    z.t()[3].fill_(-1.0)  # the last column of z, through the transposed view
    assert z[:, 3].tolist() == [-1.0, -1.0, -1.0]


def test_views_see_later_writes_to_the_base():
    x = flow.zeros(2, 3)
    v = x[1, 1:]
    x[1] = flow.tensor([1.0, 2.0, 3.0])
    assert v.tolist() == [2.0, 3.0]


def test_clone_does_not_share_storage():
    x = flow.zeros(2)
    c = x.clone()
    c.fill_(1.0)
    assert x.tolist() == [0.0, 0.0]


# =============================================================== conversions


def test_item():
    assert flow.tensor(3).item() == 3 and isinstance(flow.tensor(3).item(), int)
    assert flow.tensor(2.5).item() == 2.5 and isinstance(flow.tensor(2.5).item(), float)
    assert flow.tensor(True).item() is True
    assert flow.tensor([[7.0]]).item() == 7.0
    loss = (flow.tensor([1.0, 2.0], requires_grad=True) ** 2).sum()
    assert loss.item() == 5.0


def test_tolist():
    assert flow.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert flow.tensor(2.5).tolist() == 2.5
    assert flow.zeros(2, 0).tolist() == [[], []]
    assert flow.tensor([[1.0, 2.0], [3.0, 4.0]]).t().tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert isinstance(flow.tensor([1])[0].tolist(), int)


def test_numpy():
    x = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = x.numpy()
    assert a.dtype == np.float32 and a.shape == (2, 2)
    np.testing.assert_array_equal(a, [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(x.t().numpy(), [[1.0, 3.0], [2.0, 4.0]])
    assert flow.tensor(5).numpy().shape == ()
    assert flow.tensor([1.0], requires_grad=True).detach().numpy().tolist() == [1.0]


def test_numpy_of_a_tensor_that_requires_grad_returns_its_values():
    # OneFlow's behaviour (PyTorch asks for .detach() first): scripts call param.numpy().
    w = flow.tensor([1.0, 2.0], requires_grad=True)
    y = w * 3
    assert w.numpy().tolist() == [1.0, 2.0] and y.numpy().tolist() == [3.0, 6.0]
    y.sum().backward()  # reading the values left the graph alone
    assert w.grad.tolist() == [3.0, 3.0]


def test_python_number_conversions():
    assert float(flow.tensor(2.5)) == 2.5
    assert float(flow.tensor([1.5])) == 1.5
    assert float(flow.tensor(2)) == 2.0 and isinstance(float(flow.tensor(2)), float)
    assert int(flow.tensor(3.7)) == 3 and int(flow.tensor(-3.7)) == -3
    assert int(flow.tensor(7)) == 7 and isinstance(int(flow.tensor(7)), int)
    assert bool(flow.tensor(1.0)) and not bool(flow.tensor([0]))
    assert [10, 20, 30][flow.tensor(1)] == 20  # integer tensors work as list indices
    assert math.isclose(math.sqrt(flow.tensor(4.0)), 2.0)


def test_len_and_iteration():
    x = flow.tensor([[1, 2], [3, 4], [5, 6]])
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3 and all(isinstance(r, flow.Tensor) for r in rows)
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4], [5, 6]]
    assert [v.item() for v in flow.tensor([1.5, 2.5])] == [1.5, 2.5]
    a, b = flow.tensor([1, 2])
    assert (a.item(), b.item()) == (1, 2)
    with pytest.raises(TypeError):
        len(flow.tensor(1.0))
    with pytest.raises(TypeError):
        iter(flow.tensor(1.0))


@pytest.mark.parametrize("value", [0.123456789, 2.0, -1.5e-7, 12345.678, 0.0])
def test_format_of_a_zero_dim_tensor_is_the_python_float_format(value):
    loss = flow.tensor(value)
    v = loss.item()
    assert f"{loss}" == f"{v}"
    assert f"{loss:>7f}" == f"{v:>7f}"
    assert f"{loss:.3f}" == f"{v:.3f}"
    assert f"{loss:e}" == f"{v:e}"
    assert "{:>10.4f}".format(loss) == "{:>10.4f}".format(v)


def test_format_of_a_training_loss():
    x = flow.tensor([0.5, 1.5], requires_grad=True)
    loss = ((x - 1.0) ** 2).mean()
    assert f"loss: {loss:>7f}" == "loss: 0.250000"
    assert f"{loss}" == "0.25"


def test_format_of_a_zero_dim_tensor_matches_torch(torch):
    a = _random((), -10.0, 10.0, 5)
    f, t = flow.tensor(a), torch.tensor(a)
    for spec in ("", ">7f", ".2f", "e", "g"):
        assert format(f, spec) == format(t, spec), spec


def test_repr():
    assert repr(flow.tensor([[2.0], [3.0]])) == "tensor([[2.],\n        [3.]], dtype=oneflow.float32)"
    assert str(flow.tensor([[2.0], [3.0]])) == repr(flow.tensor([[2.0], [3.0]]))
    assert repr(flow.tensor([1, 2])) == "tensor([1, 2], dtype=oneflow.int64)"
    assert repr(flow.tensor(1.5)) == "tensor(1.5000, dtype=oneflow.float32)"
    assert repr(flow.tensor([1.0], requires_grad=True)) == "tensor([1.], dtype=oneflow.float32, requires_grad=True)"


def test_is_tensor_and_helpers():
    x = flow.ones(2)
    assert flow.is_tensor(x) and isinstance(x, flow.Tensor) and not flow.is_tensor([1])
    assert flow.is_floating_point(x) and not flow.tensor([1]).is_floating_point()
    assert flow.numel(flow.zeros(2, 3)) == 6
    assert flow.allclose(x, x + 1e-9) and not flow.allclose(x, x + 1)


# =============================================================== user errors


def test_matmul_shape_mismatch_message():
    msg = r"^matmul: cannot multiply \(2, 3\) by \(4, 5\): inner sizes 3 and 4 differ$"
    with pytest.raises(RuntimeError, match=msg):
        flow.ones(2, 3) @ flow.ones(4, 5)
    with pytest.raises(RuntimeError, match=msg):
        flow.matmul(flow.ones(2, 3), flow.ones(4, 5))


def test_add_broadcast_failure_names_add_and_both_shapes():
    with pytest.raises(RuntimeError, match=r"add.*\(2, 3\).*\(4,\)"):
        flow.ones(2, 3) + flow.ones(4)
    with pytest.raises(RuntimeError, match=r"mul.*\(2, 3\).*\(3, 2\)"):
        flow.ones(2, 3) * flow.ones(3, 2)


def test_reshape_invalid_size_message():
    with pytest.raises(RuntimeError, match=r"shape \(4, 2\) is invalid for input of size 6"):
        flow.ones(2, 3).reshape(4, 2)
    with pytest.raises(RuntimeError, match=r"shape \(5, -1\) is invalid for input of size 6"):
        flow.ones(6).reshape(5, -1)
    with pytest.raises(RuntimeError, match="only one dimension can be -1"):
        flow.ones(6).view(-1, -1)


def test_index_out_of_range_raises_index_error():
    x = flow.ones(2, 3)
    with pytest.raises(IndexError, match="index 2 is out of bounds for dimension 0 with size 2"):
        x[2]
    with pytest.raises(IndexError, match="index -3 is out of bounds"):
        x[-3]
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        x[0, 3]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="out of bounds"):
        x[flow.tensor([5])]
    with pytest.raises(IndexError):
        x[2] = 1.0
    with pytest.raises(IndexError, match="long, int or bool, got float32"):
        x[flow.tensor([0.0])]


def test_dim_out_of_range_message():
    with pytest.raises(IndexError, match=r"sum: dim 2 out of range for a tensor of 2 dims"):
        flow.ones(2, 3).sum(dim=2)


def test_cat_shape_mismatch_message():
    with pytest.raises(RuntimeError, match=r"cat: input 1 has shape \(2, 4\) but input 0 has \(2, 3\)"):
        flow.cat([flow.ones(2, 3), flow.ones(2, 4)])
    with pytest.raises(RuntimeError, match="cat: .*same number of dims"):
        flow.cat([flow.ones(2, 3), flow.ones(3)])
    with pytest.raises(RuntimeError, match=r"stack: expected all tensors of shape \(2,\), got \(3,\)"):
        flow.stack([flow.ones(2), flow.ones(3)])


def test_conv2d_wrong_channel_count_message():
    x = flow.ones(1, 3, 5, 5)
    w = flow.ones(4, 2, 3, 3)
    with pytest.raises(RuntimeError, match=r"conv2d: input has 3 channels but weight \(4, 2, 3, 3\) expects 2"):
        F.conv2d(x, w)


def test_cross_entropy_target_out_of_bounds_message():
    logits = flow.ones(2, 3)
    with pytest.raises(RuntimeError, match="target 3 is out of bounds for 3 classes"):
        F.cross_entropy(logits, flow.tensor([0, 3]))
    with pytest.raises(RuntimeError, match="target -1 is out of bounds for 3 classes"):
        F.cross_entropy(logits, flow.tensor([0, -1]))


def test_cross_entropy_probability_target_of_the_wrong_shape_message():
    with pytest.raises(ValueError, match=r"probability targets must have the input's shape \(2, 3\), got \(2,\)"):
        F.cross_entropy(flow.ones(2, 3), flow.tensor([0.0, 1.0]))


def test_index_select_wrong_index_dtype_message():
    with pytest.raises(RuntimeError, match="index_select: index must be an int64 or int32 tensor, got float32"):
        flow.index_select(flow.ones(2, 3), 0, flow.tensor([0.0]))
    with pytest.raises(RuntimeError, match="gather: index must be an int64 or int32 tensor, got bool"):
        flow.gather(flow.ones(2, 3), 1, flow.tensor([[True], [False]]))


def test_item_on_a_multi_element_tensor_message():
    msg = r"only a tensor with one element can be converted to a Python number, got shape \(2,\)"
    with pytest.raises(RuntimeError, match=msg):
        flow.ones(2).item()
    with pytest.raises(RuntimeError, match=msg):
        float(flow.ones(2))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(flow.ones(2))


def test_mean_of_an_integer_tensor_message():
    with pytest.raises(RuntimeError, match=r"mean: expected a floating point tensor, got int64"):
        flow.tensor([1, 2]).mean()


def test_type_errors_raise_type_error():
    with pytest.raises(TypeError, match="unsupported operand type"):
        flow.ones(2) + "a"
    with pytest.raises(TypeError, match="could not convert 'a'"):
        flow.tensor(["a"])


def test_float16_arithmetic_computes_in_float16():
    y = flow.ones(2).half() + 1.0
    assert y.dtype == flow.float16 and y.tolist() == [2.0, 2.0]


def test_sum_over_dim_of_a_0dim_tensor_is_the_value():
    # PyTorch's rule: dim 0 or -1 of a 0-dim tensor reduces over nothing.
    x = flow.tensor(3.0, requires_grad=True)
    y = x.sum(0)
    assert y.shape == () and y.item() == 3.0 and x.sum(-1).item() == 3.0
    y.backward()
    assert x.grad.item() == 1.0
    with pytest.raises(Exception, match="sum: dim 1 out of range"):
        x.sum(1)


def test_legacy_tensor_constructor_forms():
    # flow.Tensor(*sizes) / (Size) / (data), with dtype, requires_grad and placement + sbp.
    assert flow.Tensor(2, 3).shape == (2, 3) and flow.Tensor(2, 3).dtype == flow.float32
    assert flow.Tensor(2, 3).tolist() == [[0.0] * 3] * 2
    assert flow.Tensor(flow.Size([4])).shape == (4,)
    assert flow.Tensor([1, 2]).tolist() == [1.0, 2.0] and flow.Tensor([1, 2]).dtype == flow.float32
    assert flow.Tensor(2, dtype=flow.float64).dtype == flow.float64
    assert flow.Tensor(2, requires_grad=True).requires_grad
    g = flow.Tensor(2, 3, placement=flow.placement("cpu", ranks=[0]), sbp=flow.sbp.broadcast)
    assert g.is_global and g.shape == (2, 3)
    with pytest.raises(ValueError, match=r"Tensor: placement and sbp go together"):
        flow.Tensor(2, sbp=flow.sbp.broadcast)
    with pytest.raises(TypeError, match=r"Tensor: expected sizes \(ints\) or one data argument"):
        flow.Tensor([1], [2])


def test_python_floats_keep_their_digits_in_float64():
    assert flow.tensor(0.1, dtype=flow.float64).item() == 0.1
    assert flow.tensor([0.1, 1e-300, 1.0 / 3], dtype=flow.float64).tolist() == [0.1, 1e-300, 1.0 / 3]
    assert flow.tensor([0.1]).dtype == flow.float32  # the default stays float32
    assert flow.tensor([0.1], dtype=flow.float16).tolist() == [np.float16(0.1).item()]


def test_numpy_functions_read_tensors_as_arrays():
    # numpy.asarray and friends go through __array__ (OneFlow's tests call np.allclose(-t, a)
    # on tensors that require grad); without it numpy made object arrays.
    a = flow.tensor([1.0, -2.0], requires_grad=True)
    assert np.asarray(-a).dtype == np.float32
    assert np.allclose(-a, np.array([-1.0, 2.0]))
    assert np.asarray(flow.tensor([1, 2]), dtype=np.float64).dtype == np.float64
