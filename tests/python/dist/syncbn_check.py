"""SyncBatchNorm + DDP on the ranks' slices against BatchNorm on the whole batch in one
process: parameters and running statistics agree to 1e-4 after every step.
    usage: syncbn_check.py [uneven]"""

import sys

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from oneflow.nn.parallel import DistributedDataParallel as DDP

rank, world = flow.env.get_rank(), flow.env.get_world_size()
uneven = len(sys.argv) > 1 and sys.argv[1] == "uneven"


def make_model():
    flow.manual_seed(3)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


# Rank r holds rows [starts[r], starts[r+1]) of each batch (uneven: 3 + 5 rows on 2 ranks).
sizes = [3 + 2 * r for r in range(world)] if uneven else [4] * world
starts = np.cumsum([0] + sizes)
n = int(starts[-1])
rng = np.random.RandomState(0)
batches = [(rng.randn(n, 3, 8, 8).astype(np.float32) * 2 + 1, rng.randint(0, 3, n)) for _ in range(4)]

ref = make_model()
ref_opt = flow.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
assert isinstance(model.module[1], nn.SyncBatchNorm) and isinstance(model.module[5], nn.SyncBatchNorm)
opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
mine = slice(int(starts[rank]), int(starts[rank + 1]))

for step, (xb, yb) in enumerate(batches):
    x, y = flow.tensor(xb), flow.tensor(yb)
    # The global loss is a mean over n rows; each rank's slice contributes sum/n, and DDP's
    # average over ranks divides by world: scale by world so the gradients equal the reference.
    ref_loss = nn.functional.cross_entropy(ref(x), y, reduction="sum") / n
    ref_opt.zero_grad()
    ref_loss.backward()
    ref_opt.step()
    loss = nn.functional.cross_entropy(model(x[mine]), y[mine], reduction="sum") * world / n
    opt.zero_grad()
    loss.backward()
    opt.step()
    pairs = list(zip(model.module.parameters(), ref.parameters()))
    pairs += [(a, b) for a, b in zip(model.module.buffers(), ref.buffers()) if a.is_floating_point()]
    worst = max(float((a - b).abs().max()) for a, b in pairs)
    if worst > 1e-4:
        raise SystemExit(f"rank {rank} step {step}: SyncBatchNorm differs from one process by {worst}")
model.eval()
ref.eval()
with flow.no_grad():
    diff = float((model(x[mine]) - ref(x)[mine]).abs().max())
assert diff < 1e-4, diff
print(f"rank {rank}: SyncBatchNorm equals one-process BatchNorm ({'uneven' if uneven else 'even'})")
