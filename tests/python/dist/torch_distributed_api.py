"""oneflow.distributed under PyTorch's names, on 2 ranks, against values computed by hand; run
by tests/python/test_distributed_api.py. Started by the launcher (env://), or as two plain
processes with `tcp RANK PORT` (tcp://). Prints "rank R ok" when every check passed."""
import os
import sys

import numpy as np

import oneflow as flow
import oneflow.distributed as dist
import oneflow.nn as nn

if len(sys.argv) > 1 and sys.argv[1] == "tcp":
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[3]}", world_size=2,
                            rank=int(sys.argv[2]))
else:
    dist.init_process_group(backend="cpu:gloo,cuda:nccl", init_method="env://",
                            world_size=int(os.environ["WORLD_SIZE"]), rank=int(os.environ["RANK"]))
rank, world = dist.get_rank(), dist.get_world_size()


def check(name, got, want):
    got = got.numpy() if isinstance(got, flow.Tensor) else got
    if not np.array_equal(np.asarray(got), np.asarray(want)):
        sys.exit(f"rank {rank}: {name}: got {np.asarray(got).tolist()} want {np.asarray(want).tolist()}")


def raises(name, fn, text):
    try:
        fn()
    except (ValueError, RuntimeError, TypeError) as e:
        if str(e) != text:
            sys.exit(f"rank {rank}: {name}: message {str(e)!r}, expected {text!r}")
        return
    sys.exit(f"rank {rank}: {name}: no error")


check("world", [dist.is_available(), dist.is_initialized(), world, dist.get_backend()],
      [True, True, 2, dist.get_backend()])
raises("init twice", lambda: dist.init_process_group("gloo"),
       "init_process_group: the default process group is already initialized; call destroy_process_group() first")
dist.barrier()

mine = flow.tensor([1.0, 2.0]) * (rank + 1)                    # rank 0: [1, 2], rank 1: [2, 4]
t = mine.clone(); dist.all_reduce(t, op=dist.ReduceOp.SUM); check("all_reduce sum", t, [3.0, 6.0])
t = mine.clone(); dist.all_reduce(t, op=dist.ReduceOp.MAX); check("all_reduce max", t, [2.0, 4.0])
t = mine.clone(); dist.all_reduce(t, dist.ReduceOp.AVG); check("all_reduce avg", t, [1.5, 3.0])
t = mine.clone(); work = dist.all_reduce(t, async_op=True); work.wait(); check("async", t, [3.0, 6.0])
raises("product", lambda: dist.all_reduce(mine.clone(), op=dist.ReduceOp.PRODUCT),
       "all_reduce: ReduceOp.PRODUCT is not supported, use SUM, AVG, MIN or MAX")

outs = [flow.zeros(2) for _ in range(world)]
dist.all_gather(outs, mine); check("all_gather", [o.numpy() for o in outs], [[1.0, 2.0], [2.0, 4.0]])
objs = [None, None]
dist.all_gather_object(objs, {"rank": rank, "pad": "x" * (100 * rank)})
check("all_gather_object", [o["rank"] for o in objs] + [len(o["pad"]) for o in objs], [0, 1, 0, 100])
t = mine.clone(); dist.broadcast(t, src=1); check("broadcast", t, [2.0, 4.0])
lst = [rank, f"from {rank}", {"k": [rank]}]
dist.broadcast_object_list(lst, src=0); check("broadcast_object_list", lst == [0, "from 0", {"k": [0]}], True)
out = flow.zeros(2)
dist.reduce_scatter(out, [flow.tensor([1.0, 1.0]) * (rank + 1), flow.tensor([10.0, 10.0]) * (rank + 1)])
check("reduce_scatter", out, [[3.0, 3.0], [30.0, 30.0]][rank])
t = mine.clone(); dist.reduce(t, dst=0); check("reduce", t if rank == 0 else [3.0, 6.0], [3.0, 6.0])
gathered = [flow.zeros(2) for _ in range(world)] if rank == 1 else None
dist.gather(mine, gathered, dst=1)
if rank == 1:
    check("gather", [g.numpy() for g in gathered], [[1.0, 2.0], [2.0, 4.0]])
t = flow.zeros(3)
dist.scatter(t, [flow.full((3,), 5.0), flow.full((3,), 7.0)] if rank == 0 else None, src=0)
check("scatter", t, [[5.0] * 3, [7.0] * 3][rank])

# Point to point, PyTorch's form: recv fills the tensor and returns the sender.
if rank == 0:
    dist.send(flow.arange(4, dtype=flow.int64) * 3, dst=1)
else:
    got = flow.zeros(4, dtype=flow.int64)
    check("recv", [dist.recv(got, src=0)] + got.tolist(), [0, 0, 3, 6, 9])
raises("recv any", lambda: dist.recv(flow.zeros(1)),
       "recv: src=None (receive from any rank) is not supported, name the sending rank")

# Groups: ranks outside a group get None back and do not communicate.
solo = dist.new_group([1])
check("group rank", [dist.get_rank(solo), dist.get_world_size(solo)], [[-1, 1], [0, 1]][rank])
t = mine.clone()
result = dist.all_reduce(t, group=solo)  # rank 0: outside; rank 1: a group of one
check("outside group", [result is None] + t.tolist(), [True] + mine.tolist())
both = dist.new_group(ranks=[0, 1], backend="gloo")
t = mine.clone(); dist.all_reduce(t, group=both); check("group all_reduce", t, [3.0, 6.0])
dist.barrier(group=both)

# DistributedDataParallel with PyTorch's arguments: the gradients agree on both ranks.
flow.manual_seed(rank)  # different initial weights: DDP takes rank 0's
model = nn.parallel.DistributedDataParallel(nn.Linear(3, 2), device_ids=[int(os.environ.get("LOCAL_RANK", rank))],
                                            output_device=int(os.environ.get("LOCAL_RANK", rank)),
                                            process_group=both, broadcast_buffers=False)
model(flow.ones(4, 3) * (rank + 1)).sum().backward()
grads = [None, None]
dist.all_gather_object(grads, model.module.weight.grad.numpy().tolist())
check("ddp grads agree", grads[0] == grads[1], True)
check("ddp grad", np.asarray(grads[0]), np.full((2, 3), 6.0))  # mean over ranks of 4*(r+1)

dist.barrier()
dist.destroy_process_group()
check("destroyed", dist.is_initialized(), False)
print(f"rank {rank} ok", flush=True)
