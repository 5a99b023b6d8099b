"""DDP cases that need several ranks.
    usage: ddp_cases.py unused|unused_error|shapes|count|buffers"""

import sys

import oneflow as flow
import oneflow.nn as nn
from oneflow.nn.parallel import DistributedDataParallel as DDP

case = sys.argv[1]
rank, world = flow.env.get_rank(), flow.env.get_world_size()


class TwoHeads(nn.Module):
    """head_b takes part only on rank 0."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head_a = nn.Linear(4, 1)
        self.head_b = nn.Linear(4, 1)

    def forward(self, x):
        h = self.body(x)
        out = self.head_a(h)
        if rank == 0:
            out = out + self.head_b(h)
        return out


if case in ("unused", "unused_error"):
    flow.manual_seed(1)
    model = DDP(TwoHeads(), find_unused_parameters=(case == "unused"))
    x = flow.ones(2, 4) * (rank + 1)
    for step in range(3):
        model.zero_grad()
        model(x).sum().backward()
    # head_b's gradient is rank 0's divided by the number of ranks, on every rank.
    g = model.module.head_b.weight.grad
    h = model.module.body(x)
    expected = h.sum(0, keepdim=True).detach() / world if rank == 0 else None
    if rank == 0:
        assert float((g - expected).abs().max()) < 1e-5, (g, expected)
    got = g.sum().reshape(1)
    flow.comm.all_reduce(got, op=flow.comm.ReduceOp.MAX)
    assert float((g.sum() - got[0]).abs()) < 1e-5, "head_b's gradient differs across ranks"
    print(f"rank {rank}: unused parameter on rank 1 finished, head_b grad averaged")
elif case == "shapes":
    width = 8 if rank == world - 1 else 4
    DDP(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, width)))
elif case == "count":
    n_layers = 1 if rank == 0 else 2
    DDP(nn.Sequential(*[nn.Linear(4, 4) for _ in range(n_layers)]))
elif case == "buffers":
    flow.manual_seed(rank)  # different weights and running stats per rank before wrapping
    bn = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    with flow.no_grad():
        bn[1].running_mean.fill_(float(rank))
    model = DDP(bn)
    gathered = [flow.zeros(3) for _ in range(world)]
    flow.comm.all_gather(gathered, model.module[0].weight[0].detach().clone())
    assert all(bool((t == gathered[0]).all()) for t in gathered), "weights not broadcast"
    assert float(model.module[1].running_mean.abs().max()) == 0.0, "buffers not broadcast"
    # Each rank's forward updates its running stats from its own data; the next forward
    # starts from rank 0's again (broadcast_buffers=True), so equal data gives equal stats.
    def differs_from_rank0(t):
        theirs = t.clone()
        flow.comm.broadcast(theirs, 0)
        return float((theirs - t).abs().max()) > 0

    model(flow.randn(4, 3) + rank)
    differs = differs_from_rank0(model.module[1].running_mean)  # a collective: every rank
    assert differs == (rank != 0), "the first forward should leave rank-local statistics"

    flow.manual_seed(9)
    model(flow.randn(4, 3))
    assert not differs_from_rank0(model.module[1].running_mean), "buffers not broadcast in forward"
    print(f"rank {rank}: parameters and buffers broadcast from rank 0")
