"""F.scaled_dot_product_attention as one fused op (core/ops/nn/attention.cc): its outputs and
gradients against PyTorch 1.13's explicit formula (softmax(q k^T * scale + mask) v; 1.13 has no
fused function), against finite differences in float64, its dropout against F.dropout's mask
from the same seed, a fully masked row, the errors, and the same calls on the stand-in CUDA
device (ONEFLOW_FAKE_CUDA=1). The CUDA kernels are compared with this CPU kernel in
tests/core/cuda_kernels_test.cc (op samples), tests/cuda_host/ and test_cuda.py on a GPU."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import oneflow as flow
import oneflow.nn.functional as F


def _torch_attention(q, k, v, mask=None, causal=False, scale=None):
    s = (q @ k.transpose(-2, -1)) * (scale if scale is not None else 1 / q.shape[-1] ** 0.5)
    if causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


CASES = {
    # name: (q shape, k shape, v shape, kwargs builder)
    "plain": ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 3), {}),
    "causal L < S": ((2, 2, 5, 8), (2, 2, 7, 8), (2, 2, 7, 8), {"causal": True}),
    "causal L > S": ((1, 2, 9, 4), (1, 2, 4, 4), (1, 2, 4, 6), {"causal": True}),
    "bool mask [L, S]": ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4), {"mask": "bool"}),
    "float mask [B, 1, L, S]": ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4), {"mask": "float"}),
    "scale": ((3, 7, 16), (3, 7, 16), (3, 7, 5), {"scale": 0.3}),
    "2-D": ((6, 4), (9, 4), (9, 2), {}),
    "batch broadcast": ((2, 3, 5, 4), (1, 3, 6, 4), (2, 1, 6, 4), {"causal": True}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_the_explicit_formula_in_torch(case):
    qs, ks, vs, kw = CASES[case]
    rs = np.random.RandomState(3)
    q, k, v = (rs.randn(*s).astype(np.float32) for s in (qs, ks, vs))
    kw_a, kw_b = {}, {}
    if kw.get("causal"):
        kw_a["is_causal"], kw_b["causal"] = True, True
    if "scale" in kw:
        kw_a["scale"] = kw_b["scale"] = kw["scale"]
    if kw.get("mask") == "bool":
        m = rs.rand(qs[-2], ks[-2]) > 0.4
        m[:, 0] = True  # every row keeps an element
        kw_a["attn_mask"], kw_b["mask"] = flow.tensor(m), torch.tensor(m)
    if kw.get("mask") == "float":
        m = rs.randn(qs[0], 1, qs[-2], ks[-2]).astype(np.float32)
        kw_a["attn_mask"], kw_b["mask"] = flow.tensor(m), torch.tensor(m)
    ta = [flow.tensor(t, requires_grad=True) for t in (q, k, v)]
    tb = [torch.tensor(t, requires_grad=True) for t in (q, k, v)]
    ya, yb = F.scaled_dot_product_attention(*ta, **kw_a), _torch_attention(*tb, **kw_b)
    assert tuple(ya.shape) == tuple(yb.shape)
    _close(ya, yb)
    w = rs.randn(*yb.shape).astype(np.float32)
    (ya * flow.tensor(w)).sum().backward()
    (yb * torch.tensor(w)).sum().backward()
    for a, b in zip(ta, tb):
        assert tuple(a.grad.shape) == tuple(b.grad.shape)
        _close(a.grad, b.grad)


def _loss(q, k, v, w, **kw):
    flow.manual_seed(5)  # the same dropout mask on every call
    return (F.scaled_dot_product_attention(q, k, v, **kw) * w).sum()


@pytest.mark.parametrize("kw", [{"is_causal": True}, {"mask": True}, {"dropout_p": 0.3}],
                         ids=["causal", "float mask", "dropout"])
def test_gradients_equal_finite_differences_in_float64(kw):
    rs = np.random.RandomState(7)
    q, k, v = (rs.randn(2, 4, 3) for _ in range(3))
    w = flow.tensor(rs.randn(2, 4, 3))
    if kw.pop("mask", False):
        kw["attn_mask"] = flow.tensor(rs.randn(4, 4))
    ts = [flow.tensor(t, requires_grad=True) for t in (q, k, v)]
    _loss(*ts, w, **kw).backward()
    eps = 1e-6
    for n, t in enumerate((q, k, v)):
        num = np.zeros_like(t)
        for idx in np.ndindex(*t.shape):
            hi, lo = t.copy(), t.copy()
            hi[idx] += eps
            lo[idx] -= eps
            args = [flow.tensor(x) for x in (q, k, v)]
            args[n] = flow.tensor(hi)
            f_hi = _loss(*args, w, **kw).item()
            args[n] = flow.tensor(lo)
            f_lo = _loss(*args, w, **kw).item()
            num[idx] = (f_hi - f_lo) / (2 * eps)
        np.testing.assert_allclose(ts[n].grad.numpy(), num, rtol=1e-5, atol=1e-6)


def test_dropout_drops_the_weights_f_dropout_would_drop_with_the_same_seed():
    rs = np.random.RandomState(1)
    q, k, v = (rs.randn(2, 3, 6, 5).astype(np.float32) for _ in range(3))
    flow.manual_seed(4)
    keep = F.dropout(flow.ones(2, 3, 6, 6), 0.25, True).numpy()
    flow.manual_seed(4)
    y = F.scaled_dot_product_attention(*(flow.tensor(t) for t in (q, k, v)), dropout_p=0.25)
    tq, tk, tv = (torch.tensor(t) for t in (q, k, v))
    ref = (torch.softmax(tq @ tk.transpose(-2, -1) / 5 ** 0.5, -1) * torch.tensor(keep)) @ tv
    _close(y, ref)
    # the generator moved on by the mask's draws: the next call draws another mask
    z = F.scaled_dot_product_attention(*(flow.tensor(t) for t in (q, k, v)), dropout_p=0.25)
    assert not np.allclose(z.numpy(), y.numpy())


def test_a_fully_masked_row_is_nan_and_takes_no_part_in_the_gradients():
    rs = np.random.RandomState(2)
    q, k, v = (flow.tensor(rs.randn(1, 3, 4).astype(np.float32), requires_grad=True)
               for _ in range(3))
    m = np.ones((3, 3), bool)
    m[1] = False
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=flow.tensor(m))
    out = y.detach().numpy()
    assert np.isnan(out[0, 1]).all() and np.isfinite(out[0, [0, 2]]).all()
    w = np.ones((1, 3, 4), np.float32)
    w[0, 1] = 0  # the NaN row gets no gradient from the loss
    (y * flow.tensor(w)).sum().backward()
    for t in (q, k, v):
        assert np.isfinite(t.grad.numpy()).all()
    assert (q.grad.numpy()[0, 1] == 0).all()


def test_half_inputs_follow_float32():
    rs = np.random.RandomState(4)
    q, k, v = (rs.randn(2, 7, 8).astype(np.float32) for _ in range(3))
    ref = F.scaled_dot_product_attention(*(flow.tensor(t) for t in (q, k, v)), is_causal=True)
    for dt in (flow.bfloat16, flow.float16):
        y = F.scaled_dot_product_attention(*(flow.tensor(t).to(dt) for t in (q, k, v)),
                                           is_causal=True)
        assert y.dtype == dt
        np.testing.assert_allclose(y.float().numpy(), ref.numpy(), rtol=0.05, atol=0.05)


def test_errors_are_one_line_naming_the_op():
    q = flow.randn(2, 5, 4)
    with pytest.raises(ValueError, match="scaled_dot_product_attention: pass attn_mask or "
                                         "is_causal, not both"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=flow.ones(5, 5, dtype=flow.bool),
                                       is_causal=True)
    with pytest.raises(ValueError, match="query's last dim 4 differs from key's 3"):
        F.scaled_dot_product_attention(q, flow.randn(2, 5, 3), q)
    with pytest.raises(RuntimeError, match=r"scaled_dot_product_attention: attn_mask of shape "
                                           r"\(3, 5\) does not broadcast to \(2, 5, 5\)"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=flow.ones(3, 5, dtype=flow.bool))
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention: expected a bool or "
                                           "floating point attn_mask, got int64"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=flow.ones(5, 5, dtype=flow.int64))
    with pytest.raises(RuntimeError, match="attn_mask requires grad, but its gradient is not "
                                           "computed; pass attn_mask.detach()"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=flow.zeros(5, 5, requires_grad=True))
    with pytest.raises(RuntimeError, match="dropout_p has to be between 0 and 1, got 1.5"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=1.5)
    with pytest.raises(RuntimeError, match="query, key and value must have one dtype"):
        F.scaled_dot_product_attention(q, q.double(), q)


_FAKE_CUDA = r"""
import numpy as np
import oneflow as flow
import oneflow.nn.functional as F
rs = np.random.RandomState(0)
q, k, v = (rs.randn(2, 3, 6, 4).astype(np.float32) for _ in range(3))
m = rs.randn(6, 6).astype(np.float32)
for kw in ({}, {"is_causal": True}, {"attn_mask": m}, {"dropout_p": 0.2}):
    out = []
    for dev in ("cpu", "cuda"):
        ts = [flow.tensor(t, device=dev, requires_grad=True) for t in (q, k, v)]
        k2 = dict(kw)
        if "attn_mask" in k2:
            k2["attn_mask"] = flow.tensor(k2["attn_mask"], device=dev)
        flow.manual_seed(3)
        y = F.scaled_dot_product_attention(*ts, **k2)
        y.sum().backward()
        assert all(str(t.grad.device) == str(y.device) == dev + ("" if dev == "cpu" else ":0")
                   for t in ts), [str(t.grad.device) for t in ts]
        out.append([y.detach().to("cpu").numpy()] + [t.grad.to("cpu").numpy() for t in ts])
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)
print("fake cuda ok")
"""


def test_on_the_stand_in_cuda_device_everything_stays_on_cuda():
    env = dict(os.environ, ONEFLOW_FAKE_CUDA="1")
    r = subprocess.run([sys.executable, "-c", _FAKE_CUDA], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.strip().endswith("fake cuda ok")
