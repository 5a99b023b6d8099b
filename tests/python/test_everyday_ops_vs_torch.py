"""The everyday API's math, activations, reductions, normalizations, attention and modules,
each compared with PyTorch (Debian's python3-torch) on the same inputs: values and gradients,
rtol 1e-4 in float32. Misuse gives one line naming the operation."""

import warnings

import numpy as np
import pytest
import torch

import oneflow as flow
import oneflow.nn as nn
import oneflow.nn.functional as F

RTOL, ATOL = 1e-4, 1e-5


def _pair(shape, lo=-2.0, hi=2.0, seed=0):
    x = np.random.RandomState(seed).uniform(lo, hi, shape).astype(np.float32)
    return flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


def _close(a, b, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(a.detach().numpy() if hasattr(a, "detach") else a,
                               b.detach().numpy(), rtol=rtol, atol=atol)


def _check(fa, fb, shape=(4, 6), lo=-2.0, hi=2.0, seed=0, rtol=RTOL, atol=ATOL):
    a, b = _pair(shape, lo, hi, seed)
    ya, yb = fa(a), fb(b)
    _close(ya, yb, rtol, atol)
    if yb.requires_grad:
        w = np.asarray(np.random.RandomState(seed + 1).randn(*yb.shape), np.float32)
        (ya * flow.tensor(w)).sum().backward()
        (yb * torch.tensor(w)).sum().backward()
        _close(a.grad, b.grad, rtol, atol)


UNARY = [  # name, input range
    ("log1p", -0.9, 2), ("expm1", -2, 2), ("log2", 0.2, 3), ("log10", 0.2, 3),
    ("reciprocal", 0.3, 3), ("sin", -3, 3), ("cos", -3, 3), ("tan", -1.2, 1.2),
    ("asin", -0.9, 0.9), ("acos", -0.9, 0.9), ("atan", -3, 3), ("sinh", -2, 2), ("cosh", -2, 2),
    ("asinh", -3, 3), ("atanh", -0.9, 0.9), ("erf", -2, 2), ("erfc", -2, 2),
    ("erfinv", -0.95, 0.95), ("floor", -3, 3), ("ceil", -3, 3), ("round", -3, 3),
    ("trunc", -3, 3), ("sigmoid", -4, 4), ("arcsin", -0.9, 0.9), ("fix", -3, 3),
]


@pytest.mark.parametrize("name,lo,hi", UNARY)
def test_unary_math_matches_torch(name, lo, hi):
    _check(getattr(flow, name), getattr(torch, name), lo=lo, hi=hi)
    _check(lambda t: getattr(t, name)(), lambda t: getattr(t, name)(), lo=lo, hi=hi)


ACTIVATIONS = [
    ("silu", {}), ("mish", {}), ("hardswish", {}), ("hardsigmoid", {}), ("logsigmoid", {}),
    ("softsign", {}), ("selu", {}), ("celu", {"alpha": 0.7}), ("elu", {"alpha": 1.3}),
    ("leaky_relu", {"negative_slope": 0.2}), ("softplus", {"beta": 2, "threshold": 3}),
    ("softshrink", {"lambd": 0.3}), ("hardshrink", {"lambd": 0.3}), ("tanhshrink", {}),
    ("threshold", {"threshold": 0.1, "value": -2.0}), ("hardtanh", {"min_val": -0.5, "max_val": 1}),
    ("gelu", {"approximate": "tanh"}), ("gelu", {}), ("glu", {}),
]


@pytest.mark.parametrize("name,kw", ACTIVATIONS)
def test_activations_match_torch(name, kw):
    _check(lambda t: getattr(F, name)(t, **kw),
           lambda t: getattr(torch.nn.functional, name)(t, **kw), lo=-5, hi=5)


MODULES = [
    ("SiLU", ()), ("Mish", ()), ("Hardswish", ()), ("Hardsigmoid", ()), ("LogSigmoid", ()),
    ("SELU", ()), ("CELU", (0.5,)), ("ELU", (0.5,)), ("LeakyReLU", (0.1,)), ("Softplus", (2, 5)),
    ("Softshrink", (0.4,)), ("Hardshrink", (0.4,)), ("Threshold", (0.2, 1.5)),
    ("Hardtanh", (-0.3, 0.8)), ("Softsign", ()), ("Tanhshrink", ()), ("GLU", ()),
]


@pytest.mark.parametrize("name,args", MODULES)
def test_activation_modules_match_torch(name, args):
    ma, mb = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    _check(ma, mb, lo=-5, hi=5)
    assert repr(ma) == repr(mb)


def test_activation_integer_input_is_float_and_rounding_keeps_ints():
    i = flow.tensor([1, 2, 3])
    assert flow.sin(i).dtype == flow.float32
    assert flow.floor(i).dtype == flow.int64
    np.testing.assert_allclose(flow.round(flow.tensor([0.5, 1.5, 2.5, -0.5])).numpy(),
                               torch.round(torch.tensor([0.5, 1.5, 2.5, -0.5])).numpy())


def test_round_with_decimals_matches_torch():
    x = np.array([1.2345, -2.5, 0.125, 1234.5, 1250.0, 1350.0, 2.675, -0.05, 7.0], np.float32)
    for d in (0, 1, 2, 3, -1, -2):
        a, b = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yb = flow.round(a, decimals=d), torch.round(b, decimals=d)
        np.testing.assert_array_equal(ya.detach().numpy(), yb.detach().numpy())
        np.testing.assert_array_equal(a.round(decimals=d).detach().numpy(), b.round(decimals=d).detach().numpy())
        ya.sum().backward(), yb.sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    y = flow.tensor(x)
    y.round_(decimals=1)
    np.testing.assert_array_equal(y.numpy(), torch.tensor(x).round_(decimals=1).numpy())
    with pytest.raises(TypeError, match="round: decimals= needs a floating point tensor, got oneflow.int64"):
        flow.round(flow.tensor([1, 2]), decimals=1)


REDUCTIONS = [
    ("var", lambda m, t: m.var(t, 1)), ("var_unbiased_false", lambda m, t: m.var(t, 0, False)),
    ("var_correction", lambda m, t: t.var(dim=1, correction=0, keepdim=True)),
    ("std", lambda m, t: m.std(t)), ("std_dim", lambda m, t: t.std(dim=(0, 1))),
    ("prod", lambda m, t: m.prod(t, 1)), ("prod_all", lambda m, t: t.prod()),
    ("amax", lambda m, t: m.amax(t, 0)), ("amin", lambda m, t: m.amin(t, (0, 1), True)),
    ("logsumexp", lambda m, t: m.logsumexp(t, 1)),
    ("logsumexp_keep", lambda m, t: t.logsumexp(dim=(0, 1), keepdim=True)),
    ("norm", lambda m, t: m.norm(t)), ("norm_p1", lambda m, t: t.norm(p=1, dim=1)),
    ("vector_norm_inf", lambda m, t: m.linalg.vector_norm(t, float("inf"), 1)),
    ("vector_norm_3", lambda m, t: m.linalg.vector_norm(t, 3, (0, 1))),
    ("vector_norm", lambda m, t: m.linalg.vector_norm(t)),
    ("vector_norm_half_keep", lambda m, t: m.linalg.vector_norm(t, 0.5, -1, True)),
    ("vector_norm_neg_inf", lambda m, t: m.linalg.vector_norm(t, float("-inf"), 0)),
    ("norm_p3_dim", lambda m, t: m.norm(t, 3, 0, True)),
    ("linalg_norm", lambda m, t: m.linalg.norm(t)),
    ("linalg_norm_vector_dim", lambda m, t: m.linalg.norm(t, 4, 1)),
    ("matrix_norm_1", lambda m, t: m.linalg.norm(t, 1)), ("matrix_norm_-1", lambda m, t: m.linalg.norm(t, -1)),
    ("matrix_norm_inf", lambda m, t: m.linalg.norm(t, float("inf"))),
    ("matrix_norm_-inf_dims", lambda m, t: m.linalg.norm(t.reshape(2, 2, 6), float("-inf"), (2, 0), True)),
    ("matrix_norm_fro", lambda m, t: m.linalg.matrix_norm(t.reshape(2, 2, 6))),
    ("std_unbiased_false", lambda m, t: m.std(t, 1, False)), ("std_unbiased_kw", lambda m, t: t.std(unbiased=False)),
    ("std_correction", lambda m, t: t.std(dim=0, correction=2, keepdim=True)),
    ("var_unbiased_kw", lambda m, t: m.var(t, dim=1, unbiased=True, keepdim=True)),
    ("lerp", lambda m, t: m.lerp(t, t * t, 0.3)), ("addcmul", lambda m, t: m.addcmul(t, t, t, value=0.5)),
    ("addcdiv", lambda m, t: m.addcdiv(t, t, t * t + 1, value=2)),
    ("xlogy", lambda m, t: m.xlogy(t, t * t + 1)), ("hypot", lambda m, t: m.hypot(t, t + 1)),
    ("atan2", lambda m, t: m.atan2(t, t * 0.5 - 0.3)), ("atan2_neg", lambda m, t: m.atan2(-t, t - 1)),
]


@pytest.mark.parametrize("name,f", REDUCTIONS)
def test_reductions_and_composites_match_torch(name, f):
    _check(lambda t: f(flow, t), lambda t: f(torch, t))


def test_prod_gradient_with_zeros_matches_torch():
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 3.0]], np.float32)
    a, b = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    flow.prod(a, 1).sum().backward()
    torch.prod(b, 1).sum().backward()
    _close(a.grad, b.grad)


@pytest.mark.parametrize("p", [2, 3, 0.5, 1, float("inf")])
def test_norm_gradient_at_a_zero_vector_matches_torch(p):
    # PyTorch's subgradient is 0 where the norm is 0 (and, for p < 1, where an element is 0)
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.0], [0.0, 3.0, 0.5]], np.float32)
    for f in (lambda m, t: m.linalg.vector_norm(t, p, 1), lambda m, t: m.norm(t, p, 1),
              lambda m, t: m.linalg.vector_norm(t[0], p)):
        a, b = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yb = f(flow, a), f(torch, b)
        _close(ya, yb)
        ya.sum().backward(), yb.sum().backward()
        _close(a.grad, b.grad)
    _check(lambda t: F.normalize(t * 0, p=p, dim=1), lambda t: torch.nn.functional.normalize(t * 0, p=p, dim=1))
    z = np.zeros(4, np.float32)  # the whole-tensor norms at 0
    for f in (lambda m, t: m.norm(t), lambda m, t: m.linalg.norm(t), lambda m, t: t.norm(p)):
        a, b = flow.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
        f(flow, a).backward(), f(torch, b).backward()
        _close(a.grad, b.grad)


def test_vector_norm_of_order_zero_counts_nonzeros_like_torch():
    x = np.array([[1.0, 0.0, np.inf, np.nan], [0.0, 0.0, 0.0, -2.0]], np.float32)
    a, b = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = flow.linalg.vector_norm(a, 0, 1), torch.linalg.vector_norm(b, 0, 1)
    np.testing.assert_array_equal(ya.detach().numpy(), yb.detach().numpy())
    assert ya.requires_grad and yb.requires_grad
    ya.sum().backward()  # torch leaves .grad None here: no gradient flows
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros_like(x))


def test_linalg_norm_errors():
    with pytest.raises(RuntimeError, match=r"linalg.norm: with ord=1 and no dim the input must be 1-D or 2-D, "
                                           r"got shape \(2, 3, 4\)"):
        flow.linalg.norm(flow.ones(2, 3, 4), 1)
    with pytest.raises(NotImplementedError, match="linalg.matrix_norm: ord=2 needs an SVD"):
        flow.linalg.norm(flow.ones(2, 3), 2)
    with pytest.raises(RuntimeError, match=r"linalg.matrix_norm: dims must be different, got \(1, -1\)"):
        flow.linalg.matrix_norm(flow.ones(2, 3), dim=(1, -1))


def test_clamp_with_tensor_bounds_matches_torch():
    rs = np.random.RandomState(12)
    x, lo, hi = rs.uniform(-2, 2, (3, 4)), rs.uniform(-1.5, 0, (3, 4)), rs.uniform(0, 1.5, (4,))
    cases = [
        (lambda m, x, lo, hi: m.clamp(x, lo, hi), [x, lo, hi]),
        (lambda m, x, lo: x.clamp(min=lo), [x, lo]),
        (lambda m, x, hi: x.clamp(max=hi), [x, hi]),
        (lambda m, x, lo: m.clip(x, lo, lo + 1), [x, lo]),
        (lambda m, x, lo: x.clamp(lo[:1]), [x, lo]),  # a bound that broadcasts
    ]
    for f, arrays in cases:
        ta = [flow.tensor(v.astype(np.float32), requires_grad=True) for v in arrays]
        tb = [torch.tensor(v.astype(np.float32), requires_grad=True) for v in arrays]
        ya, yb = f(flow, *ta), f(torch, *tb)
        _close(ya, yb)
        w = rs.randn(*yb.shape).astype(np.float32)
        (ya * flow.tensor(w)).sum().backward(), (yb * torch.tensor(w)).sum().backward()
        for a, b in zip(ta, tb):
            _close(a.grad, b.grad)
    y = flow.tensor(x.astype(np.float32))
    y.clamp_(flow.tensor(lo.astype(np.float32)), flow.tensor(hi.astype(np.float32)))
    _close(y, torch.tensor(x.astype(np.float32)).clamp_(torch.tensor(lo.astype(np.float32)),
                                                        torch.tensor(hi.astype(np.float32))))


@pytest.mark.parametrize("name", ["add", "sub"])
def test_add_sub_alpha_match_torch(name):
    for alpha in (1, -2.5, 0.5):
        for shape in ((3, 4), (4,)):
            a, b = _pair((3, 4)), _pair(shape, seed=1)
            ya = getattr(flow, name)(a[0], b[0], alpha=alpha)
            yb = getattr(torch, name)(a[1], b[1], alpha=alpha)
            _close(ya, yb)
            (ya * ya).sum().backward(), (yb * yb).sum().backward()
            _close(a[0].grad, a[1].grad), _close(b[0].grad, b[1].grad)
    _check(lambda t: getattr(t, name)(t * t, alpha=3), lambda t: getattr(t, name)(t * t, alpha=3))
    _check(lambda t: getattr(flow, name)(t, 2.0, alpha=3), lambda t: getattr(torch, name)(t, 2.0, alpha=3))
    i, j = flow.tensor([1, 2]), torch.tensor([1, 2])
    assert getattr(flow, name)(i, i, alpha=2).tolist() == getattr(torch, name)(j, j, alpha=2).tolist()


def test_div_rounding_modes_and_gradients_match_torch():
    a, b = _pair((3, 4), -3, 3), _pair((3, 4), 0.5, 3, seed=1)
    for mode in (None, "floor", "trunc"):
        for div in (lambda m, x, y: m.div(x, y, rounding_mode=mode), lambda m, x, y: x.div(y, rounding_mode=mode),
                    lambda m, x, y: m.divide(x, y, rounding_mode=mode)):
            ya, yb = div(flow, a[0], b[0]), div(torch, a[1], b[1])
            _close(ya, yb)
    for mode in ("floor", "trunc"):  # rounded quotients have a zero gradient
        x, y = _pair((3, 4), -3, 3), _pair((3, 4), 0.5, 3, seed=1)
        flow.div(x[0], y[0], rounding_mode=mode).sum().backward()
        torch.div(x[1], y[1], rounding_mode=mode).sum().backward()
        _close(x[0].grad, x[1].grad), _close(y[0].grad, y[1].grad)
    _close(flow.floor_divide(a[0], b[0]), torch.floor_divide(a[1], b[1]))


def test_logical_functions_and_methods_match_torch():
    x = np.array([[1, 0, 2], [0, 0, 3]])
    y = np.array([[1.0, 1.0, 0.0], [0.0, -0.5, 0.0]], np.float32)
    fx, fy, tx, ty = flow.tensor(x), flow.tensor(y), torch.tensor(x), torch.tensor(y)
    for name in ("logical_and", "logical_or", "logical_xor"):
        for got, want in ((getattr(flow, name)(fx, fy), getattr(torch, name)(tx, ty)),
                          (getattr(fx, name)(fy), getattr(tx, name)(ty)),
                          (getattr(fy > 0, name)(fx > 1), getattr(ty > 0, name)(tx > 1))):
            assert got.dtype == flow.bool
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    for got, want in ((flow.logical_not(fx), torch.logical_not(tx)), (fy.logical_not(), ty.logical_not())):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_nan_to_num_gradient_matches_torch():
    x = np.array([1.0, np.nan, np.inf, -np.inf, -2.5, 0.0], np.float32)
    for kw in ({}, {"nan": 1.0, "posinf": 2.0, "neginf": -3.0}):
        a, b = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yb = flow.nan_to_num(a, **kw), torch.nan_to_num(b, **kw)
        np.testing.assert_array_equal(ya.detach().numpy(), yb.detach().numpy())
        (ya * flow.arange(6.0)).sum().backward(), (yb * torch.arange(6.0)).sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_predicates_and_nan_to_num_match_torch():
    x = np.array([1.0, np.nan, np.inf, -np.inf, -2.5, 0.0], np.float32)
    a, b = flow.tensor(x), torch.tensor(x)
    for name in ("isnan", "isinf", "isfinite", "isposinf", "isneginf"):
        np.testing.assert_array_equal(getattr(flow, name)(a).numpy(), getattr(torch, name)(b).numpy())
    np.testing.assert_array_equal(flow.nan_to_num(a).numpy(), torch.nan_to_num(b).numpy())
    np.testing.assert_array_equal(flow.nan_to_num(a, 1.0, 2.0, -3.0).numpy(),
                                  torch.nan_to_num(b, 1.0, 2.0, -3.0).numpy())
    i = flow.tensor([1, 2])
    assert not flow.isnan(i).any().item() and flow.isfinite(i).all().item()


def test_integer_division_modes_match_torch():
    x = np.array([7, -7, 7, -7, 0, 9], np.int64)
    y = np.array([2, 2, -2, -2, 3, -4], np.int64)
    a, b, ta, tb = flow.tensor(x), flow.tensor(y), torch.tensor(x), torch.tensor(y)
    np.testing.assert_array_equal(flow.floor_divide(a, b).numpy(), torch.div(ta, tb, rounding_mode="floor").numpy())
    np.testing.assert_array_equal((a // b).numpy(), (ta // tb).numpy())
    np.testing.assert_array_equal(a.div(b, rounding_mode="trunc").numpy(),
                                  ta.div(tb, rounding_mode="trunc").numpy())
    f, tf = flow.tensor(x.astype(np.float32)), torch.tensor(x.astype(np.float32))
    for mode in ("floor", "trunc"):
        np.testing.assert_array_equal(f.div(2.5, rounding_mode=mode).numpy(),
                                      tf.div(2.5, rounding_mode=mode).numpy())
    with pytest.raises(ValueError, match="div: rounding_mode must be None, 'trunc' or 'floor'"):
        f.div(2, rounding_mode="round")


def test_logical_xor_all_any_match_torch():
    x = np.array([[1, 0, 2], [0, 0, 3]])
    y = np.array([[1, 1, 0], [0, 1, 0]])
    np.testing.assert_array_equal(flow.logical_xor(flow.tensor(x), flow.tensor(y)).numpy(),
                                  torch.logical_xor(torch.tensor(x), torch.tensor(y)).numpy())
    for dim in (None, 0, 1):
        for name in ("all", "any"):
            got = getattr(flow, name)(flow.tensor(x)) if dim is None else getattr(flow, name)(flow.tensor(x), dim)
            want = getattr(torch, name)(torch.tensor(x)) if dim is None else getattr(torch, name)(torch.tensor(x), dim)
            np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("shape,norm", [((4, 6), (6,)), ((2, 3, 8), (8,)), ((2, 3, 4), (3, 4))])
def test_layer_norm_matches_torch(shape, norm):
    ma, mb = nn.LayerNorm(norm), torch.nn.LayerNorm(norm)
    with torch.no_grad():
        w = np.random.RandomState(3).randn(*norm).astype(np.float32)
        mb.weight.copy_(torch.tensor(w)), mb.bias.copy_(torch.tensor(w * 0.5))
    ma.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in mb.state_dict().items()})
    _check(ma, mb, shape=shape, lo=-3, hi=3)
    _close(ma.weight.grad, mb.weight.grad)
    _close(ma.bias.grad, mb.bias.grad)
    _check(lambda t: F.layer_norm(t, norm), lambda t: torch.nn.functional.layer_norm(t, norm), shape=shape)
    assert repr(ma) == repr(mb)


def test_layer_norm_errors():
    with pytest.raises(RuntimeError, match=r"layer_norm: input of shape \(2, 3\) does not end with normalized_shape \(4,\)"):
        F.layer_norm(flow.ones(2, 3), (4,))
    with pytest.raises(RuntimeError, match=r"layer_norm: expected weight of shape \(3,\) \(normalized_shape\) for input of shape \(2, 3\), got \(4,\)"):
        F.layer_norm(flow.ones(2, 3), (3,), flow.ones(4), flow.ones(3))


def test_group_and_rms_norm_match_references():
    ma, mb = nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4)
    _check(ma, mb, shape=(3, 4, 5))
    _close(ma.weight.grad, mb.weight.grad)
    a, b = _pair((3, 5))
    w = np.random.RandomState(4).rand(5).astype(np.float32)
    ya = F.rms_norm(a, (5,), flow.tensor(w), eps=1e-6)
    yb = b * torch.rsqrt((b * b).mean(-1, keepdim=True) + 1e-6) * torch.tensor(w)
    _close(ya, yb)
    ya.sum().backward(), yb.sum().backward()
    _close(a.grad, b.grad)
    with pytest.raises(ValueError, match="GroupNorm: num_channels 5 must be divisible by num_groups 2"):
        nn.GroupNorm(2, 5)


def test_rms_norm_module_matches_the_reference():
    # torch 1.13 has no RMSNorm: x * rsqrt(mean(x^2) + eps) * weight, eps the dtype's by default
    for shape, norm, eps in (((3, 5), 5, 1e-6), ((2, 3, 4), (3, 4), None)):
        m = nn.RMSNorm(norm, eps=eps)
        norm = (norm,) if isinstance(norm, int) else norm
        w = np.random.RandomState(4).rand(*norm).astype(np.float32)
        m.load_state_dict({"weight": flow.tensor(w)})
        dims = tuple(range(-len(norm), 0))
        e = torch.finfo(torch.float32).eps if eps is None else eps
        _check(m, lambda t: t * torch.rsqrt((t * t).mean(dims, keepdim=True) + e) * torch.tensor(w), shape=shape)
        assert repr(m) == f"RMSNorm({norm}, eps={eps}, elementwise_affine=True)"
    m = nn.RMSNorm(5, elementwise_affine=False)
    assert m.weight is None and list(m.parameters()) == []
    _check(m, lambda t: t * torch.rsqrt((t * t).mean(-1, keepdim=True) + torch.finfo(torch.float32).eps),
           shape=(3, 5))


def test_functional_embedding_and_group_norm_match_torch():
    idx = np.array([[1, 2, 3], [2, 9, 1]])
    for kw in ({}, {"padding_idx": 2}):
        _check(lambda w: F.embedding(flow.tensor(idx), w, **kw),
               lambda w: torch.nn.functional.embedding(torch.tensor(idx), w, **kw), shape=(10, 4))
    rs = np.random.RandomState(6)
    w, b = rs.rand(4).astype(np.float32), rs.randn(4).astype(np.float32)
    _check(lambda t: F.group_norm(t, 2, flow.tensor(w), flow.tensor(b), 1e-5),
           lambda t: torch.nn.functional.group_norm(t, 2, torch.tensor(w), torch.tensor(b), 1e-5), shape=(3, 4, 5))
    _check(lambda t: F.group_norm(t, 4), lambda t: torch.nn.functional.group_norm(t, 4), shape=(2, 4, 2, 3))


def test_embedding_matches_torch_with_padding_idx():
    mb = torch.nn.Embedding(10, 4, padding_idx=2)
    ma = nn.Embedding(10, 4, padding_idx=2)
    ma.load_state_dict({"weight": flow.tensor(mb.weight.detach().numpy())})
    idx = np.array([[1, 2, 3], [2, 9, 1]])
    ya, yb = ma(flow.tensor(idx)), mb(torch.tensor(idx))
    _close(ya, yb)
    w = np.random.RandomState(5).randn(2, 3, 4).astype(np.float32)
    (ya * flow.tensor(w)).sum().backward(), (yb * torch.tensor(w)).sum().backward()
    _close(ma.weight.grad, mb.weight.grad)
    assert ma.weight.numpy()[2].tolist() == [0, 0, 0, 0] and repr(ma) == repr(mb)
    with pytest.raises(TypeError, match="embedding: expected int64 or int32 indices, got oneflow.float32"):
        ma(flow.ones(2))


def _torch_sdpa(q, k, v, mask=None, causal=False, scale=None):
    s = (q @ k.transpose(-2, -1)) * (scale if scale else 1 / q.shape[-1] ** 0.5)
    if causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("case", ["plain", "causal", "bool_mask", "float_mask", "scale"])
def test_scaled_dot_product_attention_matches_torch(case):
    rs = np.random.RandomState(6)
    q, k, v = (rs.randn(2, 3, 5, 4).astype(np.float32) for _ in range(3))
    mask = rs.rand(5, 5) > 0.3
    np.fill_diagonal(mask, True)
    fmask = rs.randn(5, 5).astype(np.float32)
    kw_a, kw_b = {}, {}
    if case == "causal":
        kw_a, kw_b = {"is_causal": True}, {"causal": True}
    elif case == "bool_mask":
        kw_a, kw_b = {"attn_mask": flow.tensor(mask)}, {"mask": torch.tensor(mask)}
    elif case == "float_mask":
        kw_a, kw_b = {"attn_mask": flow.tensor(fmask)}, {"mask": torch.tensor(fmask)}
    elif case == "scale":
        kw_a, kw_b = {"scale": 0.3}, {"scale": 0.3}
    ta = [flow.tensor(t, requires_grad=True) for t in (q, k, v)]
    tb = [torch.tensor(t, requires_grad=True) for t in (q, k, v)]
    ya, yb = F.scaled_dot_product_attention(*ta, **kw_a), _torch_sdpa(*tb, **kw_b)
    _close(ya, yb)
    ya.sum().backward(), yb.sum().backward()
    for a, b in zip(ta, tb):
        _close(a.grad, b.grad)
    with pytest.raises(ValueError, match="scaled_dot_product_attention: pass attn_mask or is_causal, not both"):
        F.scaled_dot_product_attention(*ta, attn_mask=flow.tensor(mask), is_causal=True)


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention_dropout_matches_torch_with_the_same_mask(causal):
    # dropout_p applies to the attention weights (in training and eval alike, as PyTorch's
    # function); the mask is the one F.dropout draws from the same seed, given to torch
    rs = np.random.RandomState(9)
    q, k, v = (rs.randn(2, 3, 5, 4).astype(np.float32) for _ in range(3))
    flow.manual_seed(11)
    keep = F.dropout(flow.ones(2, 3, 5, 5), 0.4, True).numpy()
    assert 0 < (keep == 0).mean() < 1
    ta = [flow.tensor(t, requires_grad=True) for t in (q, k, v)]
    tb = [torch.tensor(t, requires_grad=True) for t in (q, k, v)]
    flow.manual_seed(11)
    ya = F.scaled_dot_product_attention(*ta, dropout_p=0.4, is_causal=causal)
    s = (tb[0] @ tb[1].transpose(-2, -1)) / 2.0
    if causal:
        s = s.masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), float("-inf"))
    yb = (torch.softmax(s, -1) * torch.tensor(keep)) @ tb[2]
    _close(ya, yb)
    w = rs.randn(2, 3, 5, 4).astype(np.float32)
    (ya * flow.tensor(w)).sum().backward(), (yb * torch.tensor(w)).sum().backward()
    for a, b in zip(ta, tb):
        _close(a.grad, b.grad)
    flow.manual_seed(12)
    other = F.scaled_dot_product_attention(*ta, dropout_p=0.4, is_causal=causal)
    assert not np.allclose(other.detach().numpy(), ya.detach().numpy())  # a fresh mask per call
    np.testing.assert_array_equal(F.scaled_dot_product_attention(*ta, dropout_p=1.0).detach().numpy(),
                                  np.zeros((2, 3, 5, 4), np.float32))


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_matches_torch(batch_first):
    torch.manual_seed(0)
    mb = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    ma = nn.MultiheadAttention(8, 2, batch_first=batch_first)
    ma.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in mb.state_dict().items()})
    assert [n for n, _ in ma.named_parameters()] == [n for n, _ in mb.named_parameters()]
    x = np.random.RandomState(7).randn(3, 4, 8).astype(np.float32)
    mask = np.triu(np.ones((3 if not batch_first else 3, 3), bool), 1)
    L = 3
    mask = np.triu(np.ones((L, L), bool), 1)
    xa, xb = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    oa, wa = ma(xa, xa, xa, attn_mask=flow.tensor(mask) if not batch_first else None)
    ob, wb = mb(xb, xb, xb, attn_mask=torch.tensor(mask) if not batch_first else None)
    _close(oa, ob), _close(wa, wb)
    oa.sum().backward(), ob.sum().backward()
    _close(xa.grad, xb.grad)
    _close(ma.in_proj_weight.grad, mb.in_proj_weight.grad)


_KPM = np.array([[False, False, False, True, True], [False, False, False, False, True]])
_CAUSAL = np.triu(np.ones((5, 5), bool), 1)


@pytest.mark.parametrize("kw", [dict(key_padding_mask=_KPM), dict(key_padding_mask=_KPM, attn_mask=_CAUSAL),
                                dict(need_weights=False), dict(average_attn_weights=False, key_padding_mask=_KPM),
                                dict(attn_mask=np.where(_CAUSAL, -1e4, 0).astype(np.float32))])
def test_multihead_attention_masks_and_weights_match_torch(kw):
    torch.manual_seed(2)
    mb = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ma = nn.MultiheadAttention(8, 2, batch_first=True)
    ma.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in mb.state_dict().items()})
    x = np.random.RandomState(7).randn(2, 5, 8).astype(np.float32)
    xa, xb = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    oa, wa = ma(xa, xa, xa, **{k: flow.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
    ob, wb = mb(xb, xb, xb, **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
    _close(oa, ob)
    assert (wa is None) == (wb is None)
    if wb is not None:
        _close(wa, wb)
    oa.sum().backward(), ob.sum().backward()
    _close(xa.grad, xb.grad)
    _close(ma.out_proj.weight.grad, mb.out_proj.weight.grad)


def test_multihead_attention_kdim_vdim_without_bias_matches_torch():
    torch.manual_seed(3)
    mb = torch.nn.MultiheadAttention(8, 2, kdim=6, vdim=4, bias=False)
    ma = nn.MultiheadAttention(8, 2, kdim=6, vdim=4, bias=False)
    assert sorted(ma.state_dict()) == sorted(mb.state_dict())
    ma.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in mb.state_dict().items()})
    rs = np.random.RandomState(8)
    q, k, v = rs.randn(5, 2, 8), rs.randn(3, 2, 6), rs.randn(3, 2, 4)
    ta = [flow.tensor(t.astype(np.float32), requires_grad=True) for t in (q, k, v)]
    tb = [torch.tensor(t.astype(np.float32), requires_grad=True) for t in (q, k, v)]
    (oa, wa), (ob, wb) = ma(*ta), mb(*tb)
    _close(oa, ob), _close(wa, wb)
    oa.sum().backward(), ob.sum().backward()
    for a, b in zip(ta, tb):
        _close(a.grad, b.grad)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_masks_match_torch(norm_first):
    torch.manual_seed(4)
    lb = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first)
    la = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first)
    la.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in lb.state_dict().items()})
    eb = torch.nn.TransformerEncoder(lb, 2, norm=torch.nn.LayerNorm(8), enable_nested_tensor=False)
    ea = nn.TransformerEncoder(la, 2, norm=nn.LayerNorm(8))
    ea.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in eb.state_dict().items()})
    m, kpm = _CAUSAL, _KPM
    _check(lambda t: la(t, src_mask=flow.tensor(m), src_key_padding_mask=flow.tensor(kpm)),
           lambda t: lb(t, src_mask=torch.tensor(m), src_key_padding_mask=torch.tensor(kpm)), shape=(2, 5, 8))
    _check(lambda t: ea(t, mask=flow.tensor(m), src_key_padding_mask=flow.tensor(kpm)),
           lambda t: eb(t, mask=torch.tensor(m), src_key_padding_mask=torch.tensor(kpm)), shape=(2, 5, 8))


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_transformer_encoder_matches_torch(norm_first, activation):
    torch.manual_seed(1)
    lb = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=activation,
                                          batch_first=True, norm_first=norm_first)
    eb = torch.nn.TransformerEncoder(lb, 2, enable_nested_tensor=False)
    la = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=activation,
                                    batch_first=True, norm_first=norm_first)
    ea = nn.TransformerEncoder(la, 2)
    sd = eb.state_dict()
    assert sorted(ea.state_dict().keys()) == sorted(sd.keys())
    ea.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in sd.items()})
    eb.eval(), ea.eval()
    _check(ea, eb, shape=(2, 5, 8))


def test_losses_and_similarity_match_torch():
    a, b = _pair((4, 6))
    t = np.random.RandomState(8).randn(4, 6).astype(np.float32)
    for red in ("mean", "sum", "none"):
        _close(F.l1_loss(a, flow.tensor(t), reduction=red),
               torch.nn.functional.l1_loss(b, torch.tensor(t), reduction=red))
    _check(lambda x: F.cosine_similarity(x, x * x + 0.1), lambda x: torch.nn.functional.cosine_similarity(x, x * x + 0.1))
    _check(lambda x: F.normalize(x, dim=1), lambda x: torch.nn.functional.normalize(x, dim=1))
    _check(lambda x: F.normalize(x, p=1, dim=0), lambda x: torch.nn.functional.normalize(x, p=1, dim=0))
    _check(nn.L1Loss().__call__ if False else (lambda x: nn.L1Loss()(x, flow.tensor(t))),
           lambda x: torch.nn.L1Loss()(x, torch.tensor(t)))


@pytest.mark.parametrize("shape", [(64, 128), (2, 3, 40, 50)])
def test_large_float32_gelu_softmax_take_onednn_and_match_torch(shape):
    # >= 4096 float32 elements go through oneDNN's primitives (core/kernels/cpu/onednn_eltwise.h)
    _check(F.gelu, torch.nn.functional.gelu, shape=shape, lo=-4, hi=4)
    for dim in (-1, 1):
        _check(lambda t: F.softmax(t, dim), lambda t: torch.softmax(t, dim), shape=shape, lo=-8, hi=8)
        _check(lambda t: F.log_softmax(t, dim), lambda t: torch.log_softmax(t, dim), shape=shape,
               lo=-8, hi=8)
    x = np.full(shape, -np.inf, np.float32)
    x[..., 0] = 1.0  # rows of one finite value among -inf
    np.testing.assert_array_equal(F.softmax(flow.tensor(x), -1).numpy(),
                                  torch.softmax(torch.tensor(x), -1).numpy())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_and_binary_losses_match_torch(reduction):
    rs = np.random.RandomState(13)
    t = rs.randn(4, 6).astype(np.float32)
    p = rs.uniform(0, 1, (4, 6)).astype(np.float32)
    w = rs.uniform(0, 2, (6,)).astype(np.float32)
    pw = rs.uniform(0.5, 3, (6,)).astype(np.float32)
    TF, r = torch.nn.functional, reduction
    cases = [  # (oneflow loss of x, torch loss of x, input range)
        (lambda x: F.l1_loss(x, flow.tensor(t), reduction=r),
         lambda x: TF.l1_loss(x, torch.tensor(t), reduction=r), 2),
        (lambda x: F.smooth_l1_loss(x, flow.tensor(t), reduction=r),
         lambda x: TF.smooth_l1_loss(x, torch.tensor(t), reduction=r), 2),
        (lambda x: F.smooth_l1_loss(x, flow.tensor(t), reduction=r, beta=0.5),
         lambda x: TF.smooth_l1_loss(x, torch.tensor(t), reduction=r, beta=0.5), 2),
        (lambda x: F.smooth_l1_loss(x, flow.tensor(t), reduction=r, beta=0.0),
         lambda x: TF.smooth_l1_loss(x, torch.tensor(t), reduction=r, beta=0.0), 2),
        (lambda x: nn.SmoothL1Loss(reduction=r, beta=2.0)(x, flow.tensor(t)),
         lambda x: torch.nn.SmoothL1Loss(reduction=r, beta=2.0)(x, torch.tensor(t)), 2),
        (lambda x: nn.L1Loss(reduction=r)(x, flow.tensor(t)),
         lambda x: torch.nn.L1Loss(reduction=r)(x, torch.tensor(t)), 2),
        (lambda x: F.binary_cross_entropy(x, flow.tensor(p), reduction=r),
         lambda x: TF.binary_cross_entropy(x, torch.tensor(p), reduction=r), 0),
        (lambda x: F.binary_cross_entropy(x, flow.tensor(p), flow.tensor(w), reduction=r),
         lambda x: TF.binary_cross_entropy(x, torch.tensor(p), torch.tensor(w), reduction=r), 0),
        (lambda x: nn.BCELoss(flow.tensor(w), reduction=r)(x, flow.tensor(p)),
         lambda x: torch.nn.BCELoss(torch.tensor(w), reduction=r)(x, torch.tensor(p)), 0),
        (lambda x: F.binary_cross_entropy_with_logits(x, flow.tensor(p), reduction=r),
         lambda x: TF.binary_cross_entropy_with_logits(x, torch.tensor(p), reduction=r), 30),
        (lambda x: F.binary_cross_entropy_with_logits(x, flow.tensor(p), flow.tensor(w), reduction=r,
                                                      pos_weight=flow.tensor(pw)),
         lambda x: TF.binary_cross_entropy_with_logits(x, torch.tensor(p), torch.tensor(w), reduction=r,
                                                       pos_weight=torch.tensor(pw)), 5),
        (lambda x: nn.BCEWithLogitsLoss(reduction=r, pos_weight=flow.tensor(pw))(x, flow.tensor(p)),
         lambda x: torch.nn.BCEWithLogitsLoss(reduction=r, pos_weight=torch.tensor(pw))(x, torch.tensor(p)), 5),
    ]
    for fa, fb, span in cases:
        lo, hi = (0.05, 0.95) if span == 0 else (-span, span)
        _check(fa, fb, lo=lo, hi=hi)
    # gradients with respect to the target too
    for fa, fb, lo in ((F.smooth_l1_loss, TF.smooth_l1_loss, -2), (F.l1_loss, TF.l1_loss, -2),
                       (F.binary_cross_entropy, TF.binary_cross_entropy, 0.05),
                       (F.binary_cross_entropy_with_logits, TF.binary_cross_entropy_with_logits, -3)):
        x, y = _pair((4, 6), lo, 0.95 if lo > 0 else 3), _pair((4, 6), 0, 1, seed=3)
        la, lb = fa(x[0], y[0], reduction=r), fb(x[1], y[1], reduction=r)
        _close(la, lb)
        la.sum().backward(), lb.sum().backward()
        _close(x[0].grad, x[1].grad), _close(y[0].grad, y[1].grad)


@pytest.mark.parametrize("reduction", ["batchmean", "mean", "sum", "none"])
def test_kl_div_matches_torch(reduction):
    rs = np.random.RandomState(14)
    q = rs.dirichlet(np.ones(6), 4).astype(np.float32)
    TF, r = torch.nn.functional, reduction
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch 1.13: reduction='mean' will change
        _check(lambda x: F.kl_div(F.log_softmax(x, 1), flow.tensor(q), reduction=r),
               lambda x: TF.kl_div(TF.log_softmax(x, 1), torch.tensor(q), reduction=r))
        _check(lambda x: nn.KLDivLoss(reduction=r, log_target=True)(x, flow.tensor(np.log(q))),
               lambda x: torch.nn.KLDivLoss(reduction=r, log_target=True)(x, torch.tensor(np.log(q))))
        for log_target in (False, True):  # gradients of both arguments
            x, y = _pair((4, 6)), _pair((4, 6), 0.01 if not log_target else -2, 1, seed=2)
            la = F.kl_div(x[0], y[0], reduction=r, log_target=log_target)
            lb = TF.kl_div(x[1], y[1], reduction=r, log_target=log_target)
            _close(la, lb)
            la.sum().backward(), lb.sum().backward()
            _close(x[0].grad, x[1].grad), _close(y[0].grad, y[1].grad)


@pytest.mark.parametrize("kw", [dict(ignore_index=3), dict(ignore_index=0, label_smoothing=0.2),
                                dict(label_smoothing=0.3, reduction="sum"), dict(ignore_index=1, reduction="none"),
                                dict(ignore_index=-1, label_smoothing=0.1, reduction="sum")])
def test_cross_entropy_ignore_index_and_label_smoothing_match_torch(kw):
    tgt = np.array([0, 3, 1, 2, 3, 0])
    _check(lambda x: F.cross_entropy(x, flow.tensor(tgt), **kw),
           lambda x: torch.nn.functional.cross_entropy(x, torch.tensor(tgt), **kw), shape=(6, 4))
    _check(lambda x: nn.CrossEntropyLoss(**kw)(x, flow.tensor(tgt)),
           lambda x: torch.nn.CrossEntropyLoss(**kw)(x, torch.tensor(tgt)), shape=(6, 4))
    tgt3 = np.array([[0, 2, 1], [2, 2, 0]])  # (N, C, d) logits, (N, d) targets
    kw3 = {k: (2 if k == "ignore_index" else v) for k, v in kw.items()}
    _check(lambda x: F.cross_entropy(x, flow.tensor(tgt3), **kw3),
           lambda x: torch.nn.functional.cross_entropy(x, torch.tensor(tgt3), **kw3), shape=(2, 3, 3))
    if "ignore_index" not in kw:  # class probabilities as targets
        probs = np.random.RandomState(3).dirichlet(np.ones(4), 6).astype(np.float32)
        _check(lambda x: F.cross_entropy(x, flow.tensor(probs), **kw),
               lambda x: torch.nn.functional.cross_entropy(x, torch.tensor(probs), **kw), shape=(6, 4))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_class_weights_of_cross_entropy_and_nll_match_torch(reduction):
    cw = np.array([0.5, 1.0, 2.0, 0.3], np.float32)
    fw, tw = flow.tensor(cw), torch.tensor(cw)
    TF = torch.nn.functional
    targets = [((6, 4), np.array([0, 3, 1, 2, 3, 0])), ((2, 4, 3), np.array([[0, 2, 1], [2, 3, 0]])),
               ((4,), np.array(1)), ((6, 4), np.random.RandomState(3).dirichlet(np.ones(4), 6).astype(np.float32))]
    for shape, tgt in targets:
        for kw in ({}, {"label_smoothing": 0.2}, {"ignore_index": 3}, {"ignore_index": 0, "label_smoothing": 0.1}):
            if tgt.dtype == np.float32 and "ignore_index" in kw:
                continue
            _check(lambda x: F.cross_entropy(x, flow.tensor(tgt), fw, reduction=reduction, **kw),
                   lambda x: TF.cross_entropy(x, torch.tensor(tgt), tw, reduction=reduction, **kw), shape=shape)
            if tgt.dtype != np.float32:
                _check(lambda x: F.nll_loss(F.log_softmax(x, 1 if len(shape) > 1 else 0), flow.tensor(tgt), fw,
                                            ignore_index=kw.get("ignore_index", -100), reduction=reduction),
                       lambda x: TF.nll_loss(torch.log_softmax(x, 1 if len(shape) > 1 else 0), torch.tensor(tgt), tw,
                                             ignore_index=kw.get("ignore_index", -100), reduction=reduction),
                       shape=shape)
    tgt = np.array([0, 3, 1, 2, 3, 0])
    for fa, fb in ((nn.CrossEntropyLoss(fw, reduction=reduction, label_smoothing=0.1),
                    torch.nn.CrossEntropyLoss(tw, reduction=reduction, label_smoothing=0.1)),
                   (nn.NLLLoss(fw, ignore_index=2, reduction=reduction),
                    torch.nn.NLLLoss(tw, ignore_index=2, reduction=reduction))):
        assert list(fa.state_dict()) == list(fb.state_dict()) == ["weight"]
        _check(lambda x: fa(x, flow.tensor(tgt)), lambda x: fb(x, torch.tensor(tgt)), shape=(6, 4))
    assert list(nn.CrossEntropyLoss().state_dict()) == []
    with pytest.raises(ValueError, match=r"^cross_entropy: expected weight of shape \(4,\) \(one per class\), "
                                         r"got \(3,\)$"):
        F.cross_entropy(flow.ones(2, 4), flow.tensor([0, 1]), flow.ones(3))
