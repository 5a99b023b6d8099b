"""Printing of tensors: exact OneFlow-style strings, and PyTorch's layout rules checked
against torch's own formatter where torch is installed."""

import math
import random

import pytest

import oneflow as flow
from oneflow import _tensor_str


def test_integral_floats_print_with_a_trailing_dot():
    assert repr(flow.tensor([[2.0], [3.0]])) == "tensor([[2.],\n        [3.]], dtype=oneflow.float32)"


def test_str_equals_repr():
    t = flow.tensor([[2.0], [3.0]])
    assert str(t) == repr(t)


def test_fixed_point_uses_four_decimals_and_a_common_width():
    assert repr(flow.tensor([1.5, -22.25])) == "tensor([  1.5000, -22.2500], dtype=oneflow.float32)"


def test_negative_integral_floats_are_right_aligned():
    assert repr(flow.tensor([-1.0, 2.0])) == "tensor([-1.,  2.], dtype=oneflow.float32)"


def test_small_values_switch_to_scientific():
    assert repr(flow.tensor([1e-5, 1.0])) == "tensor([1.0000e-05, 1.0000e+00], dtype=oneflow.float32)"


def test_wide_range_of_integral_values_switches_to_scientific():
    assert repr(flow.tensor([1.0, 1e9])) == "tensor([1.0000e+00, 1.0000e+09], dtype=oneflow.float32)"


def test_non_finite_values_do_not_set_the_format():
    t = flow.tensor([float("inf"), 1.5, float("nan")])
    assert repr(t) == "tensor([   inf, 1.5000,    nan], dtype=oneflow.float32)"


def test_float64_names_its_dtype():
    assert repr(flow.tensor([1.5], dtype=flow.float64)) == "tensor([1.5000], dtype=oneflow.float64)"


def test_int_tensor():
    assert repr(flow.tensor([1, 20, 300])) == "tensor([  1,  20, 300], dtype=oneflow.int64)"


def test_int32_tensor():
    assert repr(flow.tensor([[1, -2], [3, 4]], dtype=flow.int32)) == (
        "tensor([[ 1, -2],\n        [ 3,  4]], dtype=oneflow.int32)"
    )


def test_bool_tensor():
    assert repr(flow.tensor([True, False])) == "tensor([ True, False], dtype=oneflow.bool)"


def test_zero_dim_tensors():
    assert repr(flow.tensor(3.5)) == "tensor(3.5000, dtype=oneflow.float32)"
    assert repr(flow.tensor(3.0)) == "tensor(3., dtype=oneflow.float32)"
    assert repr(flow.tensor(7)) == "tensor(7, dtype=oneflow.int64)"


def test_empty_tensors_show_their_shape_unless_it_is_0():
    assert repr(flow.zeros(0)) == "tensor([], dtype=oneflow.float32)"
    assert repr(flow.zeros(0, 3)) == "tensor([], size=(0, 3), dtype=oneflow.float32)"


def test_leaf_that_requires_grad():
    t = flow.tensor([1.0, 2.0], requires_grad=True)
    assert repr(t) == "tensor([1., 2.], dtype=oneflow.float32, requires_grad=True)"


def test_non_leaf_shows_its_grad_fn():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    name = y.grad_fn.name()
    assert name  # the suffix below must not be empty brackets
    assert repr(y) == f"tensor([2., 4.], dtype=oneflow.float32, grad_fn=<{name}>)"


def test_no_grad_result_has_no_autograd_suffix():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    with flow.no_grad():
        y = x * 2
    assert repr(y) == "tensor([2., 4.], dtype=oneflow.float32)"


def test_parameter_repr():
    p = flow.nn.Parameter(flow.tensor([1.0, 2.0]))
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], dtype=oneflow.float32, requires_grad=True)"


def test_three_dims_separate_blocks_with_a_blank_line():
    t = flow.arange(8).reshape(2, 2, 2)
    assert repr(t) == (
        "tensor([[[0, 1],\n"
        "         [2, 3]],\n"
        "\n"
        "        [[4, 5],\n"
        "         [6, 7]]], dtype=oneflow.int64)"
    )


def test_long_vectors_wrap_at_80_columns():
    t = flow.arange(30).float()
    assert repr(t) == (
        "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
        "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
        "        28., 29.], dtype=oneflow.float32)"
    )


def test_more_than_1000_elements_are_summarised():
    assert repr(flow.arange(2000)) == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], dtype=oneflow.int64)"


def test_summarised_matrix():
    t = flow.arange(2000).reshape(40, 50)
    assert repr(t) == (
        "tensor([[   0,    1,    2,  ...,   47,   48,   49],\n"
        "        [  50,   51,   52,  ...,   97,   98,   99],\n"
        "        [ 100,  101,  102,  ...,  147,  148,  149],\n"
        "        ...,\n"
        "        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n"
        "        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n"
        "        [1950, 1951, 1952,  ..., 1997, 1998, 1999]], dtype=oneflow.int64)"
    )


def test_summarised_format_only_looks_at_printed_values():
    # The large middle value is left out, so it must not force scientific notation.
    values = [0.5] * 1001
    values[500] = 1e9
    assert repr(flow.tensor(values)) == (
        "tensor([0.5000, 0.5000, 0.5000,  ..., 0.5000, 0.5000, 0.5000],\n"
        "       dtype=oneflow.float32)"
    )


def test_long_suffix_moves_to_its_own_line():
    t = flow.tensor([0.1234] * 12, requires_grad=True)
    assert repr(t) == (
        "tensor([0.1234, 0.1234, 0.1234, 0.1234, 0.1234, 0.1234, 0.1234, 0.1234, 0.1234,\n"
        "        0.1234, 0.1234, 0.1234], dtype=oneflow.float32, requires_grad=True)"
    )


# ---- the layout against PyTorch's formatter on many tensors ----


def _random_cases():
    rng = random.Random(0)
    shapes = [(1,), (5,), (13,), (3, 4), (2, 3, 4), (2, 1, 3, 2), (7, 300), (1001,), (20, 60), (4, 5, 60)]
    scales = [1.0, 1e-6, 1e-3, 1e3, 1e9, 123.0]
    cases = []
    for shape in shapes:
        n = math.prod(shape)
        for scale in scales:
            cases.append((shape, [rng.gauss(0, 1) * scale for _ in range(n)], "float32"))
        cases.append((shape, [float(rng.randint(-50, 50)) for _ in range(n)], "float32"))
        cases.append((shape, [rng.gauss(0, 1) for _ in range(n)], "float64"))
        cases.append((shape, [rng.randint(-10**6, 10**6) for _ in range(n)], "int64"))
        cases.append((shape, [rng.random() < 0.5 for _ in range(n)], "bool"))
    return cases


def _nest(flat, shape):
    if len(shape) == 1:
        return list(flat)
    step = len(flat) // shape[0]
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def test_layout_matches_pytorch():
    torch = pytest.importorskip("torch")
    import torch._tensor_str as torch_tensor_str

    for shape, flat, dtype_name in _random_cases():
        data = _nest(flat, shape)
        indent = len("tensor(")
        ours = _tensor_str._tensor_str(flow.tensor(data, dtype=getattr(flow, dtype_name)), indent)
        theirs = torch_tensor_str._tensor_str(torch.tensor(data, dtype=getattr(torch, dtype_name)), indent)
        assert ours == theirs, f"shape {shape}, dtype {dtype_name}"
