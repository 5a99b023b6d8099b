"""Every flow.comm collective against values computed by hand; run by tests/python/test_comm.py
through the launcher. Prints one line per rank: "rank R of N ok <transport>"."""

import sys

import numpy as np

import oneflow as flow

rank, n = flow.env.get_rank(), flow.env.get_world_size()


def check(name, got, want):
    got = got.numpy() if isinstance(got, flow.Tensor) else np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape or not np.array_equal(got, want.astype(got.dtype)):
        sys.exit(f"rank {rank}: {name}: got {got.tolist()} want {want.tolist()}")


for dtype, np_dtype in [(flow.float32, np.float32), (flow.int64, np.int64)]:
    def mine(r, k=6):
        return np.arange(r * 10, r * 10 + k).astype(np_dtype)

    def t(a):
        return flow.tensor(np.asarray(a, dtype=np_dtype), dtype=dtype)

    everyone = np.stack([mine(r) for r in range(n)])
    for op, want in [("sum", everyone.sum(0)), ("max", everyone.max(0)),
                     ("min", everyone.min(0))]:
        x = t(mine(rank)).reshape(3, 2)
        flow.comm.all_reduce(x, op=op)
        check(f"all_reduce {op} {dtype}", x, want.reshape(3, 2))
    if dtype == flow.float32:
        x = t(mine(rank))
        flow.comm.all_reduce(x, op=flow.comm.ReduceOp.AVG)
        check("all_reduce avg", x, everyone.mean(0))
    # non-contiguous input: reduced in place through a copy
    x = t(mine(rank)).reshape(2, 3).t()
    flow.comm.all_reduce(x)
    check("all_reduce of a transposed view", x, everyone.sum(0).reshape(2, 3).T)
    # async: several in flight, waited in order
    xs = [t(mine(rank) + k) for k in range(3)]
    works = [flow.comm.all_reduce(x, async_op=True) for x in xs]
    for k, (x, w) in enumerate(zip(xs, works)):
        w.wait()
        check(f"async all_reduce {k}", x, everyone.sum(0) + n * k)

    x = t(mine(rank))
    flow.comm.broadcast(x, src=n - 1)
    check("broadcast", x, mine(n - 1))

    # all_gather, even then uneven (rank r gives r + 1 rows)
    outs = [flow.zeros(6, dtype=dtype) for _ in range(n)]
    flow.comm.all_gather(outs, t(mine(rank)))
    for r in range(n):
        check(f"all_gather from {r}", outs[r], mine(r))
    outs = [flow.zeros(r + 1, 2, dtype=dtype) for r in range(n)]
    flow.comm.all_gather(outs, t(np.full((rank + 1, 2), rank * 100)))
    for r in range(n):
        check(f"uneven all_gather from {r}", outs[r], np.full((r + 1, 2), r * 100))
    big = flow.zeros(n * 6, dtype=dtype)
    flow.comm.all_gather_into_tensor(big, t(mine(rank)))
    check("all_gather_into_tensor", big, everyone.reshape(-1))

    # reduce_scatter: rank r's j-th input is r*10 + j*100 + arange(4)
    def rs_in(r, j, k=4):
        return np.arange(k) + r * 10 + j * 100

    out = flow.zeros(4, dtype=dtype)
    flow.comm.reduce_scatter(out, [t(rs_in(rank, j)) for j in range(n)])
    check("reduce_scatter", out, sum(rs_in(r, rank) for r in range(n)))
    out = flow.zeros(rank + 1, dtype=dtype)  # uneven: rank j receives j + 1 elements
    flow.comm.reduce_scatter(out, [t(rs_in(rank, j, j + 1)) for j in range(n)], op="max")
    check("uneven reduce_scatter max", out, rs_in(n - 1, rank, rank + 1))
    out = flow.zeros(2, dtype=dtype)
    flow.comm.reduce_scatter_tensor(out, t(np.arange(2 * n) + rank))
    check("reduce_scatter_tensor", out, sum(np.arange(2 * n) + r for r in range(n))[2 * rank:2 * rank + 2])

    # all_to_all, uneven: rank r sends j + 1 copies of r*10 + j to rank j
    outs = [flow.zeros(rank + 1, dtype=dtype) for _ in range(n)]
    flow.comm.all_to_all(outs, [t(np.full(j + 1, rank * 10 + j)) for j in range(n)])
    for j in range(n):
        check(f"all_to_all from {j}", outs[j], np.full(rank + 1, j * 10 + rank))

    # send/recv around a ring, OneFlow style (meta sent) and PyTorch style
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    if rank % 2 == 0:
        flow.comm.send(t(mine(rank)).reshape(2, 3), nxt)
        got = flow.comm.recv(prv)
    else:
        got = flow.comm.recv(prv)
        flow.comm.send(t(mine(rank)).reshape(2, 3), nxt)
    check("send/recv with meta", got, mine(prv).reshape(2, 3))
    buf = flow.zeros(6, dtype=dtype)
    if rank % 2 == 0:
        flow.comm.send(t(mine(rank) * 2), nxt)
        flow.comm.recv(buf, prv)
    else:
        flow.comm.recv(buf, prv)
        flow.comm.send(t(mine(rank) * 2), nxt)
    check("torch-style recv", buf, mine(prv) * 2)

flow.comm.barrier()
print(f"rank {rank} of {n} ok {flow.comm.transport()}", flush=True)
