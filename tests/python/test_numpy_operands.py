"""A numpy array or scalar as an operand of a tensor's operators, in both orders, against PyTorch
(the reference computes with torch.from_numpy(array): this numpy is newer than what Debian's
torch 1.13 hands its reflected operators to). An array becomes a tensor on the other operand's
device, or on a global operand's placement with broadcast; a numpy scalar or 0-d array is a
number."""

import operator

import numpy as np
import pytest
import torch

import oneflow as flow

ARITHMETIC = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow"]
COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]
LOGICAL = ["and_", "or_", "xor"]

RNG = np.random.default_rng(0)
X = RNG.uniform(0.5, 3.0, (2, 3)).astype(np.float32)
A = RNG.uniform(0.5, 3.0, (2, 3))  # float64: the result is float64, as in PyTorch
A[0, 0] = X[0, 0]  # one equal element for the comparisons


def _same(ours, ref):
    assert isinstance(ours, flow.Tensor), type(ours)
    assert str(ours.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    assert tuple(ours.shape) == tuple(ref.shape)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ARITHMETIC + COMPARISONS)
def test_an_array_operand_in_both_orders_matches_torch(op):
    f = getattr(operator, op)
    x, tx, ta = flow.tensor(X), torch.tensor(X), torch.from_numpy(A)
    _same(f(x, A), f(tx, ta))
    _same(f(A, x), f(ta, tx))


@pytest.mark.parametrize("op", LOGICAL)
def test_a_bool_array_operand_in_both_orders_matches_torch(op):
    f = getattr(operator, op)
    b, a = np.array([True, True, False, False]), np.array([True, False, True, False])
    _same(f(flow.tensor(b), a), f(torch.tensor(b), torch.from_numpy(a)))
    _same(f(a, flow.tensor(b)), f(torch.from_numpy(a), torch.tensor(b)))


def test_an_int_array_keeps_integer_arithmetic():
    x, a = np.array([[7, -7, 5]], dtype=np.int32), np.array([[2, 2, 3]])
    for op in ("add", "sub", "mul", "floordiv", "mod"):
        f = getattr(operator, op)
        _same(f(flow.tensor(x), a), f(torch.tensor(x), torch.from_numpy(a)))
        _same(f(a, flow.tensor(x)), f(torch.from_numpy(a), torch.tensor(x)))


def test_matmul_with_an_array_in_both_orders():
    x = flow.tensor(X)
    right = RNG.standard_normal((3, 2)).astype(np.float32)  # torch's matmul wants one dtype
    left = RNG.standard_normal((4, 2)).astype(np.float32)
    _same(x @ right, torch.tensor(X) @ torch.from_numpy(right))
    _same(left @ x, torch.from_numpy(left) @ torch.tensor(X))


@pytest.mark.parametrize("scalar", [np.float32(2.5), np.float64(0.5), np.int64(3),
                                    np.array(2.0), np.array(4)], ids=repr)
def test_a_numpy_scalar_is_a_number(scalar):
    for x, tx in ((flow.tensor(X), torch.tensor(X)),
                  (flow.tensor([[1, 2, 3]], dtype=flow.int32), torch.tensor([[1, 2, 3]], dtype=torch.int32))):
        for op in ("add", "sub", "mul", "truediv", "lt", "eq"):
            f = getattr(operator, op)
            _same(f(x, scalar), f(tx, scalar.item()))
            _same(f(scalar, x), f(scalar.item(), tx))


def test_an_array_operand_follows_a_global_tensor():
    P = flow.placement("cpu", ranks=[0])
    g = flow.tensor(X).to_global(placement=P, sbp=flow.sbp.split(0))
    for r in (g + A, A - g, g < A, A * g, g @ A.T):
        assert r.is_global and r.placement == P
    np.testing.assert_allclose((A - g).numpy(), A - X)
    # several ranks (the array broadcast, the result's sbp): tests/python/dist/global_api.py


def test_a_tensor_result_keeps_autograd():
    x = flow.tensor(X, requires_grad=True)
    (A * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), A.astype(np.float32), rtol=1e-6)


def test_other_operands_still_raise_one_line():
    with pytest.raises(TypeError, match="unsupported operand type <class 'str'> for a oneflow tensor"):
        flow.ones(2) + "a"
