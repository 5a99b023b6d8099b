"""The bubble of flow.nn.parallel.Pipeline: per rank, busy time (its stage's forward and backward
calls) against the wall time of a training step, next to the schedule's ideal (p-1)/(m+p-1).
A measurement, not a test: it prints one line per rank.
    usage: pipeline_bubble.py gpipe|1f1b MICRO_BATCHES HIDDEN BATCH STEPS
"""

import sys

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from oneflow.nn.parallel.pipeline import ideal_bubble

schedule, m, hidden, batch, steps = sys.argv[1], *map(int, sys.argv[2:6])
rank, world = flow.env.get_rank(), flow.env.get_world_size()
placements = [flow.placement("cpu", ranks=[r]) for r in range(world)]
B = flow.sbp.broadcast

flow.manual_seed(0)
stages = [nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
          for _ in range(world)]
pipe = flow.nn.parallel.Pipeline(stages, placements, loss_fn=nn.MSELoss(), num_micro_batches=m,
                                 schedule=schedule)
opt = flow.optim.SGD(pipe.parameters(), lr=1e-3)
rng = np.random.RandomState(0)
x = flow.tensor(rng.randn(batch, hidden).astype(np.float32)).to_global(placement=placements[0], sbp=B)
y = flow.tensor(rng.randn(batch, hidden).astype(np.float32)).to_global(placement=placements[-1], sbp=B)
rows = []
for step in range(steps + 1):
    flow.comm.barrier()
    opt.zero_grad()
    pipe.train_step(x, y)
    opt.step()
    if step > 0:  # the first step builds communicators and caches
        rows.append((pipe.last_timing["wall"], pipe.last_timing["busy"], pipe.last_timing["transfer"]))
wall, busy, transfer = np.median(np.array(rows), axis=0)
print(f"rank {rank} {schedule} p={world} m={m} hidden={hidden} batch={batch}: wall/step "
      f"{wall * 1e3:.1f} ms busy {busy * 1e3:.1f} ms transfer+wait {transfer * 1e3:.1f} ms "
      f"bubble {1 - busy / wall:.3f} ideal {ideal_bubble(world, m):.3f}", flush=True)
