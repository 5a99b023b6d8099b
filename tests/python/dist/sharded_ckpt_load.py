"""Loads the checkpoints of sharded_ckpt_save.py (and one a single process wrote) on 2 ranks.
    usage: sharded_ckpt_load.py DIR
Into data parallel (dp2: everything broadcast) and another tensor-parallel layout (tp2), values
bit-identical to the saved ones; each rank reads only bytes of its own shards and the ranks
together read each byte once; Adam's moments come back in their parameters' layouts and a step
runs (rank 0 writes the parameters after it to DIR/dp2_step.npz for the one-process comparison).
"""

import os
import sys

import numpy as np

import oneflow as flow
import oneflow._sharded_checkpoint as sc
from sharded_ckpt_common import batch, flatten, make, same
from device import DEVICE  # noqa: E402

folder = sys.argv[1]
rank = flow.env.get_rank()
ITEMSIZE = {flow.float32: 4, flow.int64: 8}


def local_nbytes(module):
    total = 0
    for t in module.state_dict().values():
        local = t.to_local() if t.is_global else t
        total += local.numel() * ITEMSIZE[t.dtype]
    return total


def check_model(state, expected, prefix, layout):
    model = make(1, layout)  # other weights, overwritten by the load
    sbps = {k: v.sbp for k, v in model.state_dict().items()}
    before = sc.bytes_read[0]
    model.load_state_dict(state)
    read = sc.bytes_read[0] - before
    # No rank reads more than it holds; the ranks together read each byte once (a broadcast
    # tensor is read in disjoint parts and gathered), 0-dim tensors on every rank.
    assert read <= local_nbytes(model), (layout, read, local_nbytes(model))
    total = flow.tensor([read], dtype=flow.int64)
    flow.comm.all_reduce(total)
    whole = sum(v.numel() * ITEMSIZE[v.dtype] * (1 if v.dim() else flow.env.get_world_size())
                for v in model.state_dict().values())
    assert total.item() == whole, (layout, total.item(), whole)
    got = model.state_dict()
    for k, v in got.items():
        assert v.sbp == sbps[k], (k, v.sbp, sbps[k])  # the model keeps its layout
        assert same(v.numpy(), expected[prefix + k]), (layout, k)
    return model


# ---- tensor parallel on 4 ranks -> data parallel / other tensor parallel on 2 ranks ----
path = os.path.join(folder, "tp4")
expected = np.load(os.path.join(folder, "tp4.npz"))
state = flow.load(path)
assert isinstance(state["model"]["fc1.weight"], sc.LazyTensor), type(state["model"]["fc1.weight"])
assert tuple(state["model"]["fc1.weight"].shape) == (10, 6)
for layout in ("dp2", "tp2"):
    model = check_model(state["model"], expected, "model/", layout)
    opt = flow.optim.Adam(model.parameters(), lr=0.01)
    opt.load_state_dict(state["opt"])
    for i, p in enumerate(model.parameters()):
        st = opt.state[p]
        assert st["step"] == 1, st["step"]  # saved after one step
        for name in ("exp_avg", "exp_avg_sq"):
            assert st[name].is_global and st[name].sbp == p.sbp, (name, st[name].sbp, p.sbp)
            assert same(st[name].numpy(), expected[f"opt/state/{i}/{name}"]), (layout, i, name)
    (model(batch(layout)) ** 2).sum().backward()
    opt.step()
    after = flatten(model.state_dict())
    if rank == 0 and layout == "dp2":
        np.savez(os.path.join(folder, "dp2_step.npz"), **after)
extra = state["extra"]
assert same(extra["psum"].numpy(), np.full((3, 4), 10.0, np.float32))
assert extra["steps"] == 3 and extra["names"] == ["a", "b"] and extra["pair"] == (1, 2.5)
assert extra["tied"][0] is extra["tied"][1]  # one tensor saved twice stays one
# Saved on ranks [2, 3] and [1, 3] of 4; loaded like tensors on rank 1 only, and on [0, 1].
for key in ("sub", "sub_psum"):
    lazy = extra[key]
    on_1 = flow.zeros(*lazy.shape, dtype=lazy.dtype,
                      placement=flow.placement(DEVICE, ranks=[1]), sbp=flow.sbp.broadcast)
    got = sc.materialize_like(lazy, on_1)
    assert got.placement == on_1.placement and got.shape == lazy.shape
    if rank == 1:
        assert same(got.to_local().numpy(), expected["extra/" + key]), key
    split = flow.zeros(*lazy.shape, dtype=lazy.dtype,
                       placement=flow.placement(DEVICE, ranks=[0, 1]), sbp=flow.sbp.split(1))
    assert split.shape == lazy.shape
    got = sc.materialize_like(lazy, split)
    assert got.sbp == (flow.sbp.split(1),)
    assert same(got.numpy(), expected["extra/" + key]), key
try:
    flow.load(path, map_location="cpu")
    raise AssertionError("map_location accepted")
except NotImplementedError as ex:
    print(f"rank {rank} error: {ex}")

# ---- a 2x2 mesh with 2-D NdSbps -> 2 ranks ----
mesh_expected = np.load(os.path.join(folder, "mesh.npz"))
for layout in ("dp2", "tp2"):
    check_model(flow.load(os.path.join(folder, "mesh")), mesh_expected, "", layout)

# ---- one process (local tensors) -> tensor parallel on 2 ranks ----
one = os.path.join(folder, "one")
if os.path.exists(one):
    one_expected = np.load(os.path.join(folder, "one.npz"))
    check_model(flow.load(one), one_expected, "", "tp2")
print(f"rank {rank} sharded load ok")
