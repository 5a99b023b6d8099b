"""Prints every forward / backward interval of three Pipeline training steps on this rank, on the
machine's monotonic clock (time.perf_counter: CLOCK_MONOTONIC, one clock for every process of
the machine), so the test can check that the stages ran at the same time.
    usage: pipeline_overlap.py gpipe|1f1b
"""

import sys

import oneflow as flow
import oneflow.nn as nn

schedule = sys.argv[1]
rank, world = flow.env.get_rank(), flow.env.get_world_size()
placements = [flow.placement("cpu", ranks=[r]) for r in range(world)]
B = flow.sbp.broadcast
H = 1024
flow.manual_seed(0)
stages = [nn.Sequential(nn.Linear(H, H), nn.Tanh(), nn.Linear(H, H), nn.Tanh()) for _ in range(world)]
pipe = flow.nn.parallel.Pipeline(stages, placements, loss_fn=nn.MSELoss(), num_micro_batches=4,
                                 schedule=schedule)
pipe.trace = True
x = flow.randn(512, H).to_global(placement=placements[0], sbp=B)
y = flow.randn(512, H).to_global(placement=placements[-1], sbp=B)
flow.comm.barrier()
pipe.train_step(x, y)  # the first step builds communicators and caches
for step in range(3):  # measured steps: on a busy machine the OS may serialise one of them
    flow.comm.barrier()
    pipe.train_step(x, y)
    for kind, s, k, start, end in pipe.last_timing["trace"]:
        if kind in "FB" and s == rank:
            print(f"interval {step} {kind} {s} {k} {start:.6f} {end:.6f}", flush=True)
