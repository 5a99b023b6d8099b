"""Run on 4 ranks by test_big_models.py: global creation builds only each rank's shard, with
the logical values one process draws for the same seed (every layout: S(0), S(1), B, P, a 2 x 2
mesh, uneven splits), nn.init and dropout likewise, and no rank allocates more than its shard."""

import math

import numpy as np

import oneflow as flow
import oneflow.nn as nn
import oneflow.nn.functional as F

S, B, P = flow.sbp.split, flow.sbp.broadcast, flow.sbp.partial_sum
rank, world = flow.env.get_rank(), flow.env.get_world_size()
assert world == 4
ALL = flow.placement("cpu", ranks=[0, 1, 2, 3])
MESH = flow.placement("cpu", ranks=[[0, 1], [2, 3]])
LAYOUTS = [(ALL, S(0)), (ALL, S(1)), (ALL, B), (ALL, P), (MESH, (S(0), S(1))),
           (MESH, (B, S(0))), (MESH, (S(1), P))]
SHAPES = [(8, 6), (7, 5)]  # even and uneven over 4 ranks


def same(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and np.array_equal(a, b), f"rank {rank}: {what}: differ"


CREATIONS = {
    "randn": lambda shape, **k: flow.randn(*shape, **k),
    "rand": lambda shape, **k: flow.rand(*shape, **k),
    "normal": lambda shape, **k: flow.normal(1.5, 0.5, shape, **k),
    "randint": lambda shape, **k: flow.randint(-3, 9, shape, **k),
    "zeros": lambda shape, **k: flow.zeros(*shape, **k),
    "ones": lambda shape, **k: flow.ones(*shape, **k),
    "full": lambda shape, **k: flow.full(shape, 2.5, **k),
    "empty.shape": lambda shape, **k: flow.zeros(flow.empty(*shape, **k).shape),
}
for name, make in CREATIONS.items():
    for shape in SHAPES:
        for pl, sbp in LAYOUTS:
            flow.manual_seed(7)
            want = make(shape).numpy()
            after_want = flow.rand(3).numpy()  # the generator moved as far
            flow.manual_seed(7)
            got = make(shape, placement=pl, sbp=sbp)
            after_got = flow.rand(3).numpy()
            if name == "empty.shape":
                got = flow.zeros(got.shape)
            same(got.numpy(), want, f"{name}{shape} {sbp}")
            same(after_got, after_want, f"{name}{shape} {sbp}: generator")
print(f"rank {rank} creation layout-invariant ok", flush=True)

# 1-D creations, split or not
for n in (10, 13):
    for sbp in (S(0), B):
        same(flow.arange(n, placement=ALL, sbp=sbp).numpy(), flow.arange(n).numpy(), "arange")
        same(flow.arange(1.0, 2.0, 0.07, placement=ALL, sbp=sbp).numpy(),
             flow.arange(1.0, 2.0, 0.07).numpy(), "arange float")
        same(flow.linspace(-1, 3, n, placement=ALL, sbp=sbp).numpy(), flow.linspace(-1, 3, n).numpy(),
             "linspace")
# *_like and new_* of a global tensor: its layout, its logical shape
for pl, sbp in LAYOUTS:
    x = flow.zeros(7, 5, placement=pl, sbp=sbp)
    for like in ("randn_like", "rand_like", "zeros_like", "ones_like"):
        flow.manual_seed(3)
        want = getattr(flow, like)(flow.zeros(7, 5)).numpy()
        flow.manual_seed(3)
        got = getattr(flow, like)(x)
        assert got.placement == pl and got.sbp == (sbp if isinstance(sbp, tuple) else (sbp,))
        same(got.numpy(), want, f"{like} {sbp}")
    same(flow.randint_like(x, 0, 5).numpy().shape, (7, 5), "randint_like")
    same(x.new_ones((3, 4)).numpy(), np.ones((3, 4), np.float32), "new_ones")
# eye and flow.tensor(numpy or local tensor) build only the shard; randperm, logspace and
# hann_window give one process's values on every layout (randperm is built whole: every element
# depends on the whole permutation)
data = np.arange(35, dtype=np.float32).reshape(7, 5)
for pl, sbp in LAYOUTS:
    same(flow.eye(7, 5, placement=pl, sbp=sbp).numpy(), np.eye(7, 5, dtype=np.float32), "eye")
    same(flow.tensor(data, placement=pl, sbp=sbp).numpy(), data, "tensor(numpy)")
    same(flow.tensor(flow.tensor(data), placement=pl, sbp=sbp).numpy(), data, "tensor(tensor)")
for sbp in (S(0), B):
    flow.manual_seed(2)
    want = flow.randperm(13).numpy()
    flow.manual_seed(2)
    same(flow.randperm(13, placement=ALL, sbp=sbp).numpy(), want, "randperm")
    same(flow.logspace(-1, 2, 13, placement=ALL, sbp=sbp).numpy(), flow.logspace(-1, 2, 13).numpy(),
         "logspace")
    same(flow.hann_window(13, placement=ALL, sbp=sbp).numpy(), flow.hann_window(13).numpy(),
         "hann_window")
big = np.ones((1024, 1024), np.float32)
for what, make in [("eye", lambda: flow.eye(1024, placement=ALL, sbp=S(1))),
                   ("tensor(numpy)", lambda: flow.tensor(big, placement=ALL, sbp=S(0)))]:
    flow.cpu.reset_peak_memory_stats()
    base = flow.cpu.memory_allocated()
    t = make()
    rise = flow.cpu.max_memory_allocated() - base
    assert rise <= (1 << 20) + 4096, f"rank {rank}: {what} S: peak rise {rise} for a 1 MiB shard"
    del t
print(f"rank {rank} like and 1-D creation ok", flush=True)

INITS = {
    "uniform_": lambda t: nn.init.uniform_(t, -0.3, 0.7),
    "normal_": lambda t: nn.init.normal_(t, 0.2, 0.05),
    "constant_": lambda t: nn.init.constant_(t, 0.25),
    "zeros_": nn.init.zeros_,
    "ones_": nn.init.ones_,
    "kaiming_uniform_": lambda t: nn.init.kaiming_uniform_(t, a=math.sqrt(5)),
    "kaiming_normal_": nn.init.kaiming_normal_,
    "xavier_uniform_": nn.init.xavier_uniform_,
    "xavier_normal_": nn.init.xavier_normal_,
    "trunc_normal_": lambda t: nn.init.trunc_normal_(t, std=0.02),
}
for name, init in INITS.items():
    for shape in SHAPES:
        for pl, sbp in LAYOUTS:
            flow.manual_seed(11)
            want = init(nn.Parameter(flow.empty(*shape))).numpy()
            p = nn.Parameter(flow.empty(*shape, placement=pl, sbp=sbp))
            flow.manual_seed(11)
            got = init(p)
            assert got is p and p.is_global and p.placement == pl
            sbp_t = sbp if isinstance(sbp, tuple) else (sbp,)
            if any(s == P for s in sbp_t):  # a partial sum's value is the sum of the shards
                same(p.numpy(), want, f"{name}{shape} {sbp}")
            else:
                np.testing.assert_allclose(p.numpy(), want, rtol=1e-6, atol=1e-7,
                                           err_msg=f"rank {rank}: {name}{shape} {sbp}")
print(f"rank {rank} nn.init layout-invariant ok", flush=True)

for shape in SHAPES:
    for pl, sbp in LAYOUTS:
        flow.manual_seed(5)
        want = F.dropout(flow.ones(*shape), p=0.5, training=True).numpy()
        flow.manual_seed(5)
        got = F.dropout(flow.ones(*shape, placement=pl, sbp=sbp), p=0.5, training=True)
        same(got.numpy(), want, f"dropout{shape} {sbp}")
print(f"rank {rank} dropout masks layout-invariant ok", flush=True)


def peak_rise(make):
    flow.cpu.reset_peak_memory_stats()
    base = flow.cpu.memory_allocated()
    out = make()
    return flow.cpu.max_memory_allocated() - base, out


# Peak memory: 4 MiB logical, 1 MiB per rank under S(0); nothing outside the placement.
N = 1024
for name in ("randn", "rand", "normal", "randint", "zeros", "ones", "full"):
    rise, x = peak_rise(lambda: CREATIONS[name]((N, N), placement=ALL, sbp=S(1)))
    shard = x.to_local().numel() * x.element_size()
    assert shard == (1 << 20) * (2 if name == "randint" else 1), (name, shard)
    assert rise <= shard + 4096, f"rank {rank}: {name} S(1): peak rise {rise} for a shard of {shard}"
    del x
    pair = flow.placement("cpu", ranks=[0, 1])
    rise, x = peak_rise(lambda: CREATIONS[name]((N, N), placement=pair, sbp=S(0)))
    if rank >= 2:
        assert rise == 0, f"rank {rank}: {name} outside its placement allocated {rise} bytes"
    del x
p = nn.Parameter(flow.empty(N, N, placement=MESH, sbp=(S(0), S(1))))
rise, _ = peak_rise(lambda: nn.init.kaiming_uniform_(p, a=math.sqrt(5)))
assert rise <= (N * N) + 4096, f"rank {rank}: kaiming_uniform_ on a 2x2 mesh: peak rise {rise}"
print(f"rank {rank} creation peak memory ok", flush=True)

# A module built on meta, placed shard by shard: the values one process builds for the seed.
import sys, os  # noqa: E401,E402
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from test_big_models import _small_model  # noqa: E402

flow.manual_seed(21)
ref = {k: v.numpy() for k, v in _small_model().state_dict().items()}
flow.manual_seed(21)
with flow.device("meta"):
    m = _small_model()
layouts = {"1.weight": S(0), "3.weight": S(1), "0.weight": S(1), "4.weight": S(1)}  # 4 is tied to 0
m.to_global(ALL, sbp=lambda name: layouts.get(name, B))
for k, v in m.state_dict().items():
    assert v.sbp == (layouts.get(k, B),), (k, v.sbp)
    same(v.numpy(), ref[k], f"meta to_global {k}")
m2 = None
flow.manual_seed(21)
with flow.device("meta"):
    m2 = _small_model()
m2.to_global(MESH, sbp=lambda name: (S(0), S(1)) if name.endswith("weight") and "2." not in name
             else (B, B))
for k, v in m2.state_dict().items():
    same(v.numpy(), ref[k], f"meta to_global 2x2 {k}")
print(f"rank {rank} meta modules placed ok", flush=True)

# Layout changes and sharded checkpoints: no rank builds the whole tensor for a shard result
# (1 MiB shards of a 4 MiB tensor; every route: boxing_memory.py).
MIB = 1 << 20
x = flow.randn(N, N, placement=ALL, sbp=S(0))
b = x.to_global(sbp=B)
part = flow.randn(N, N, placement=ALL, sbp=P)
for what, make, bound in [("B->S(1)", lambda: b.to_global(sbp=S(1)), 1.3 * MIB),
                          ("P->S(0)", lambda: part.to_global(sbp=S(0)), 1.3 * MIB),
                          ("S(0)->S(1)", lambda: x.to_global(sbp=S(1)), 1.3 * MIB)]:
    flow.comm.barrier()
    rise, out = peak_rise(make)
    same(out.numpy(), x.numpy() if what != "P->S(0)" else part.numpy(), what)
    assert rise <= bound, f"rank {rank}: {what}: peak rise {rise} bytes for a 1 MiB shard"
ckpt = os.path.join(os.environ["BIG_MODELS_TMP"], "ckpt")
rise, _ = peak_rise(lambda: flow.save({"w": x}, ckpt, sharded=True))
assert rise <= 64 << 10, f"rank {rank}: a sharded save allocated {rise} bytes"
from oneflow._sharded_checkpoint import materialize_like  # noqa: E402
pair = flow.placement("cpu", ranks=[0, 1])
like = flow.empty(N, N, placement=pair, sbp=S(1))
rise, w = peak_rise(lambda: materialize_like(flow.load(ckpt)["w"], like))
assert rise <= (1.3 * 2 * MIB if rank < 2 else 64 << 10), \
    f"rank {rank}: loading a 2 MiB shard allocated {rise} bytes"
same(w.numpy(), x.numpy(), "sharded load into another layout")
print(f"rank {rank} layout changes and sharded checkpoints peak memory ok", flush=True)

# Global meta tensors deduce what real ones compute: the same shapes, dtypes, SBPs and local
# shapes for each op, with no memory and no communication.
def meta_like(t):
    return flow.empty(*t.shape, dtype=t.dtype, placement=t.placement, sbp=t.sbp, device="meta")


CASES = [
    ("matmul S0 x B", lambda a, b: a @ b, [(ALL, S(0), (8, 6)), (ALL, B, (6, 5))]),
    ("matmul S1 x S0", lambda a, b: a @ b, [(ALL, S(1), (8, 6)), (ALL, S(0), (6, 5))]),
    ("matmul S0 x S1", lambda a, b: a @ b, [(ALL, S(0), (8, 6)), (ALL, S(1), (6, 5))]),
    ("add B + S1", lambda a, b: a + b, [(ALL, B, (7, 5)), (ALL, S(1), (7, 5))]),
    ("sum S0", lambda a: a.sum(0), [(ALL, S(0), (8, 6))]),
    ("softmax S1", lambda a: a.softmax(-1), [(ALL, S(1), (8, 6))]),
    ("mesh linear", lambda a, w: F.linear(a, w),
     [(MESH, (S(0), B), (8, 6)), (MESH, (B, S(0)), (4, 6))]),
    ("to S0 -> S1", lambda a: a.to_global(sbp=S(1)), [(ALL, S(0), (7, 5))]),
]
for what, op, specs in CASES:
    reals = [flow.randn(*shape, placement=pl, sbp=sbp) for pl, sbp, shape in specs]
    real = op(*reals)
    before = flow.cpu.memory_allocated()
    meta = op(*[meta_like(r) for r in reals])
    assert flow.cpu.memory_allocated() - before == 0, what
    assert meta.is_meta and meta.is_global, what
    assert (tuple(meta.shape), meta.dtype, meta.sbp, meta.placement) == \
        (tuple(real.shape), real.dtype, real.sbp, real.placement), (what, meta.sbp, real.sbp)
    assert tuple(meta.to_local().shape) == tuple(real.to_local().shape), what
print(f"rank {rank} global meta deduction ok", flush=True)
