"""oneflow.profiler: where the time goes, per op (key_averages().table()) and on a timeline
(export_chrome_trace; tensorboard_trace_handler per rank, ``python3 -m oneflow.profiler.merge
DIR`` for one timeline of all ranks). Names as OneFlow's and torch.profiler's.

    import oneflow.profiler as profiler
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        with profiler.record_function("step"):
            train_step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
"""
from oneflow.profiler.events import EventList, FunctionEvent, FunctionEventAvg
from oneflow.profiler.profiler import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    supported_activities,
    tensorboard_trace_handler,
)

__all__ = [
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
    "ProfilerAction",
    "ProfilerActivity",
    "profile",
    "record_function",
    "schedule",
    "supported_activities",
    "tensorboard_trace_handler",
]
