"""A sharded save that dies half-way leaves the previous checkpoint loadable.
    usage: sharded_ckpt_kill.py DIR
4 ranks save the tensor-parallel model to DIR/ckpt (rank 0 writes its whole values to
DIR/before.npz), train one step, and save again; during that second save rank 1 exits right
after writing its first shard (the job dies there)."""

import os
import sys

import numpy as np

import oneflow as flow
import oneflow._sharded_checkpoint as sc
from sharded_ckpt_common import batch, flatten, make

folder = sys.argv[1]
rank = flow.env.get_rank()
path = os.path.join(folder, "ckpt")
model = make(0, "tp4")
flow.save(model.state_dict(), path, sharded=True)
whole = flatten(model.state_dict())
if rank == 0:
    np.savez(os.path.join(folder, "before.npz"), **whole)
flow.comm.barrier()

opt = flow.optim.SGD(model.parameters(), lr=0.5)
(model(batch("tp4")) ** 2).sum().backward()
opt.step()
if rank == 1:
    write = sc._write_shard

    def write_then_die(f, data):
        write(f, data)
        f.flush()
        print("rank 1 dies after its first shard", flush=True)
        os._exit(17)

    sc._write_shard = write_then_die
flow.save(model.state_dict(), path, sharded=True)
print(f"rank {rank} unreachable")
