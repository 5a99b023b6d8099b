"""ZeroRedundancyOptimizer on a 2x2 mesh: data parallel across mesh dimension 0, tensor parallel
across dimension 1 (fc1 column-parallel split(0), fc2 row-parallel split(1)). The state takes
split(0) where the parameter is broadcast, so every element of Adam's moments is held by exactly
one rank (the bytes over the 4 ranks sum to the logical state); the parameters after 4 steps
equal one-process AdamW training (1e-5).
    usage: zero_mesh.py   (4 ranks)
"""

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from device import DEVICE  # noqa: E402

rank = flow.env.get_rank()
M = flow.placement(DEVICE, ranks=[[0, 1], [2, 3]])
B, S0, S1 = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1)


def make():
    flow.manual_seed(2)
    return nn.Sequential(nn.Linear(12, 10), nn.Tanh(), nn.Linear(10, 3))


def mse(out, y):
    return ((out - y) ** 2).mean()


ref = make()
ro = flow.optim.AdamW(ref.parameters(), lr=1e-2)
m = make().to_global(placement=M, sbp=[B, B])
# tensor parallel on mesh dim 1: fc1 weight/bias column-parallel S(0)
m[0].weight = flow.nn.Parameter(m[0].weight.to_global(sbp=[B, S0]))
m[0].bias = flow.nn.Parameter(m[0].bias.to_global(sbp=[B, S0]))
m[2].weight = flow.nn.Parameter(m[2].weight.to_global(sbp=[B, S1]))
o = flow.distributed.ZeroRedundancyOptimizer(m.parameters(), optimizer_class=flow.optim.AdamW, lr=1e-2)
rng = np.random.RandomState(0)
for step in range(4):
    xb, yb = rng.randn(8, 12).astype(np.float32), rng.randn(8, 3).astype(np.float32)
    ro.zero_grad()
    mse(ref(flow.tensor(xb)), flow.tensor(yb)).backward()
    ro.step()
    x = flow.tensor(xb).to_global(placement=M, sbp=[B, B]).to_global(sbp=[S0, B])
    y = flow.tensor(yb).to_global(placement=M, sbp=[B, B]).to_global(sbp=[S0, B])
    o.zero_grad()
    mse(m(x), y).backward()
    o.step()
for (n, p), q in zip(m.named_parameters(), ref.parameters()):
    err = np.abs(p.to_global(sbp=[B, B]).to_local().numpy() - q.detach().numpy()).max()
    st = o.state[o.shard_of(p)]["exp_avg"]
    assert err < 1e-5, (n, err)
    want = tuple(S0 if s == B else s for s in p.sbp)
    assert tuple(st.sbp) == want, (n, st.sbp, want)
mine = o.state_bytes_per_rank()
whole = 2 * 4 * sum(p.numel() for p in ref.parameters())
total = flow.tensor([float(mine)]).to_global(placement=flow.placement(DEVICE, ranks=[0, 1, 2, 3]),
                                             sbp=flow.sbp.partial_sum)
total = int(total.to_global(sbp=B).to_local().item())
assert total == whole, (total, whole)
print(f"rank {rank} mesh state bytes {mine} of {whole} ok", flush=True)
