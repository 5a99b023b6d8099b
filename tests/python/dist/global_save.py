"""state_dict save and load of a global module on every rank.
    usage: global_save.py DIR
Rank 0 alone writes DIR/model.of (gathered, atomic); a fresh global module loads it (also with
global_src_rank, where only rank 0 reads); a one-process check reads the same file later."""

import os
import sys

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from device import DEVICE  # noqa: E402

folder = sys.argv[1]
rank = flow.env.get_rank()
P = flow.placement(DEVICE, ranks=list(range(flow.env.get_world_size())))


def make(seed):
    flow.manual_seed(seed)
    m = nn.Sequential(nn.Linear(5, 7), nn.BatchNorm1d(7), nn.Linear(7, 3)).to_global(
        placement=P, sbp=flow.sbp.broadcast)
    m[0].weight = nn.Parameter(m[0].weight.to_global(sbp=flow.sbp.split(0)))  # 7 rows: uneven
    return m


model = make(0)
opt = flow.optim.SGD(model.parameters(), lr=0.1)
x = flow.randn(6, 5).to_global(placement=P, sbp=flow.sbp.broadcast).to_global(sbp=flow.sbp.split(0))
model(x).sum().backward()
opt.step()
path = os.path.join(folder, "model.of")
flow.save(model.state_dict(), path)
written = sorted(os.listdir(folder))
assert written == ["model.of"], written  # no temporary left behind, one file
for src in (None, 0):
    fresh = make(1)
    state = flow.load(path) if src is None else flow.load(path, global_src_rank=src)
    fresh.load_state_dict(state)
    assert fresh[0].weight.sbp == (flow.sbp.split(0),), fresh[0].weight.sbp
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert np.array_equal(a.numpy(), b.numpy()), name
whole = {k: v.numpy() for k, v in model.state_dict().items()}
if rank == 0:
    np.savez(os.path.join(folder, "..", "expected.npz"), **whole)
print(f"rank {rank}: global state_dict saved by rank 0 and loaded back")
