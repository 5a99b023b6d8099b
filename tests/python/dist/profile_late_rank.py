"""Two ranks profile three all-reduces; rank 1 reaches the second one LATE_S late. Each rank
writes its trace to argv[1] (tensorboard_trace_handler), for test_profiler's merge check."""
import sys
import time

import oneflow as flow
from oneflow import profiler

LATE_S = 0.3

rank = flow.env.get_rank()
t = flow.ones(1024)
flow.comm.all_reduce(t)  # the job is joined and the group made before recording
with profiler.profile(on_trace_ready=profiler.tensorboard_trace_handler(sys.argv[1])):
    for i in range(3):
        if i == 1 and rank == 1:
            time.sleep(LATE_S)
        flow.comm.all_reduce(t)
print(f"rank {rank}: done {float(t[0])}", flush=True)
