"""The everyday ops on global tensors, 2 ranks: each under B, S(0) and S(1) inputs gives the
one-process value (composites that make constants, like one_hot's classes, mode's positions and
layer_norm's default weight, make them on the input's placement). Prints 'rank R <case> ok'."""

import numpy as np

import oneflow as flow
import oneflow.nn.functional as F
from device import DEVICE  # noqa: E402

P = flow.placement.all(DEVICE); B=flow.sbp.broadcast; S=flow.sbp.split
rank = flow.env.get_rank()
x_np = np.random.RandomState(0).randn(4, 6).astype(np.float32)
idx_np = np.array([0, 2, 1, 3])


def g(a, sbp):
    return flow.tensor(a, placement=P, sbp=B).to_global(sbp=sbp)


res = {}
for sbp in (B, S(0), S(1)):
    x, xl = g(x_np, sbp), flow.tensor(x_np)
    for name, f in [("cumsum", lambda t: flow.cumsum(t, 1)), ("sort", lambda t: flow.sort(t, 1)[0]),
                    ("topk", lambda t: flow.topk(t, 2, 1)[0]), ("tril", lambda t: flow.tril(t)),
                    ("flip", lambda t: flow.flip(t, [1])), ("roll", lambda t: flow.roll(t, 1, 1)),
                    ("median", lambda t: flow.median(t, 1)[0]), ("mode", lambda t: flow.mode(t.round(), 1)[0]),
                    ("amax", lambda t: flow.amax(t, 1)), ("logsumexp", lambda t: flow.logsumexp(t, 1)),
                    ("layer_norm", lambda t: F.layer_norm(t, (6,))), ("softmax", lambda t: F.softmax(t, 1)),
                    ("gelu", lambda t: F.gelu(t, approximate="tanh")), ("var", lambda t: t.var(1)),
                    ("cumprod", lambda t: flow.cumprod(t, 0)), ("argsort", lambda t: flow.argsort(t, 0)),
                    ("diag", lambda t: flow.diag(t[:, :4])), ("repeat", lambda t: t.repeat(2, 1)),
                    ("chunk", lambda t: flow.chunk(t, 2, 1)[1]), ("einsum", lambda t: flow.einsum("ij,kj->ik", t, t))]:
        try:
            got = f(x).numpy(); want = f(xl).numpy()
            ok = np.allclose(got, want, atol=1e-5)
        except Exception as e:
            ok = f"ERR {str(e)[:150]}"
        if ok is not True: res[(name, str(sbp))] = ok
    i = g(idx_np, sbp if sbp != S(1) else B)
    for name, f in [("one_hot", lambda t: F.one_hot(t, 5)), ("embedding", lambda t: F.embedding(t, flow.tensor(x_np, placement=P, sbp=B)))]:
        try:
            ok = np.allclose(f(i).numpy(), f(flow.tensor(idx_np)).numpy() if name=="one_hot" else F.embedding(flow.tensor(idx_np), flow.tensor(x_np)).numpy())
        except Exception as e:
            ok = f"ERR {str(e)[:150]}"
        if ok is not True: res[(name, str(sbp))] = ok
assert not res, res
print(f"rank {rank} ops ok", flush=True)
for sbp in (B, S(0)):
    i = g(idx_np, sbp)
    for nc in (5, -1):
        got = F.one_hot(i, nc)
        assert np.array_equal(got.numpy(), F.one_hot(flow.tensor(idx_np), nc).numpy()), (sbp, nc)
        assert got.sbp == i.sbp, got.sbp
print(f"rank {rank} one_hot ok", flush=True)
