"""Writes sharded checkpoints from 4 ranks.
    usage: sharded_ckpt_save.py DIR
DIR/tp4: {"model", "opt" (Adam after one step), "extra" (a partial-sum tensor and plain data)}
saved under tensor parallel (fc1 S(0) with 10 rows over 4 ranks, fc2 S(1)); DIR/mesh: the model
on a 2x2 mesh with 2-D NdSbps. Rank 0 writes the whole values (gathered) to DIR/*.npz for the
loaders to compare with."""

import os
import sys

import numpy as np

import oneflow as flow
import oneflow._sharded_checkpoint as sc
from sharded_ckpt_common import flatten, make, batch, B, S0, S1
from device import DEVICE  # noqa: E402

folder = sys.argv[1]
rank = flow.env.get_rank()
P = flow.placement(DEVICE, ranks=[0, 1, 2, 3])

model = make(0, "tp4")
opt = flow.optim.Adam(model.parameters(), lr=0.01)
(model(batch("tp4")) ** 2).sum().backward()
opt.step()
assert model.fc1.weight.to_local().shape == ((3, 6) if rank < 2 else (2, 6))
# A partial-sum tensor: rank r adds (r + 1) * ones; the saved value is the sum, 10 * ones.
psum = flow.ones(3, 4).mul(rank + 1).to_global(placement=P, sbp=flow.sbp.partial_sum)
# Placements without rank 0: ranks outside them take part in the save all the same.
sub = flow.arange(15, dtype=flow.float32).reshape(5, 3).to_global(
    placement=flow.placement(DEVICE, ranks=[2, 3]), sbp=B).to_global(sbp=S0)
sub_psum = flow.ones(2, 2, dtype=flow.float64).mul(rank).to_global(
    placement=flow.placement(DEVICE, ranks=[1, 3]), sbp=flow.sbp.partial_sum)
state = {"model": model.state_dict(), "opt": opt.state_dict(),
         "extra": {"psum": psum, "steps": 3, "names": ["a", "b"], "pair": (1, 2.5),
                   "tied": [model.fc2.bias, model.fc2.bias], "sub": sub, "sub_psum": sub_psum}}
flow.save(state, os.path.join(folder, "tp4"), sharded=True)
whole = flatten(state)
assert np.array_equal(whole["extra/psum"], np.full((3, 4), 10.0, np.float32))
assert np.array_equal(whole["extra/sub_psum"], np.full((2, 2), 4.0))  # ranks 1 + 3

mesh = make(0, "mesh")
mesh_state = mesh.state_dict()
flow.save(mesh_state, os.path.join(folder, "mesh"), sharded=True)
mesh_whole = flatten(mesh_state)

if rank == 0:
    np.savez(os.path.join(folder, "tp4.npz"), **whole)
    np.savez(os.path.join(folder, "mesh.npz"), **mesh_whole)
print(f"rank {rank} sharded save ok")
