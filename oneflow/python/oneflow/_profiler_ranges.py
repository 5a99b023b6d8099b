"""Ranges that Python code below oneflow.profiler opens in the profiler's timeline (the C++
recorder's user kind), e.g. the DataLoader's waits. Off, ``range_or_none`` is one call that
returns None.

    r = range_or_none("DataLoader wait")
    ...
    if r is not None: r.end()
"""
import oneflow._oneflow_internal as _C


def range_or_none(name):
    """A running range named ``name`` while the profiler records, else None."""
    return _C._ProfilerRange(name) if _C._profiler_enabled() else None

