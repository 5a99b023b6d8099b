"""Chrome trace event JSON (what chrome://tracing and Perfetto open) from profiler events, and
the merge of several ranks' traces into one timeline.

    trace = to_chrome_trace(events, rank=0, world_size=2, clock_offset_ns=0)
    merged = merge_traces([trace0, trace1])  # one process row per rank, rank 0's clock

Each rank's trace keeps its own steady clock in ``ts`` (microseconds) and says in
``distributedInfo`` how far it is from rank 0's (``clock_offset_ns``, measured through the
control plane); merging subtracts that offset, so the ranks share one time axis.
"""

import json


def _args(e):
    args = {}
    if e.input_shapes:
        args["Input Shapes"] = e.input_shapes
    if e.bytes >= 0:
        args["bytes"] = e.bytes
    if e.detail:
        args["group" if e.kind == "collective" else "detail"] = e.detail
    if e.cpu_memory_usage:
        args["cpu_memory_usage"] = e.cpu_memory_usage
    if e.cuda_memory_usage:
        args["cuda_memory_usage"] = e.cuda_memory_usage
    if e.parent is not None:
        args["parent"] = e.parent.name
    if getattr(e, "stack", None):
        args["Call stack"] = e.stack  # with_stack: innermost frame first
    return args


def to_chrome_trace(events, rank=0, world_size=1, clock_offset_ns=0, clock_rtt_ns=0,
                    thread_names=None):
    """The trace of one rank: one "X" event per recorded range (pid = rank, tid = the OS thread),
    and for ops timed on a CUDA device one "X" event on that device's row."""
    thread_names = thread_names or {}
    out = [
        {"name": "process_name", "ph": "M", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}},
        {"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0, "args": {"sort_index": rank}},
    ]
    threads = sorted({e.thread for e in events})
    for i, t in enumerate(threads):
        out.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": t,
                    "args": {"name": thread_names.get(t, f"thread {t}" if i else "main thread")}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": rank, "tid": t,
                    "args": {"sort_index": i}})
    devices = set()
    for e in events:
        out.append({"ph": "X", "cat": e.kind, "name": e.name, "pid": rank, "tid": e.thread,
                    "ts": e.start_ns / 1e3, "dur": (e.end_ns - e.start_ns) / 1e3, "args": _args(e)})
        if e.device >= 0 and e.device_start_ns >= 0 and not any(
                c.device >= 0 for c in e.children):
            tid = f"cuda:{e.device}"
            devices.add(tid)
            out.append({"ph": "X", "cat": "kernel", "name": e.name, "pid": rank, "tid": tid,
                        "ts": e.device_start_ns / 1e3,
                        "dur": (e.device_end_ns - e.device_start_ns) / 1e3, "args": {}})
    for d in sorted(devices):
        out.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": d,
                    "args": {"name": f"{d} stream"}})
    return {
        "schemaVersion": 1,
        "displayTimeUnit": "ms",
        "distributedInfo": {"rank": rank, "world_size": world_size,
                            "clock_offset_ns": clock_offset_ns, "clock_rtt_ns": clock_rtt_ns},
        "traceEvents": out,
    }


def write_trace(trace, path):
    if str(path).endswith(".gz"):
        import gzip

        with gzip.open(path, "wt") as f:
            json.dump(trace, f)
    else:
        with open(path, "w") as f:
            json.dump(trace, f)


def read_trace(path):
    if str(path).endswith(".gz"):
        import gzip

        with gzip.open(path, "rt") as f:
            return json.load(f)
    with open(path) as f:
        return json.load(f)


def merge_traces(traces):
    """One timeline of several ranks' traces: every event of rank r in process row r, its time
    moved onto rank 0's clock. Two traces of one rank (a schedule's cycles) share its row."""
    events, ranks = [], set()
    world_size = 0
    for trace in traces:
        info = trace.get("distributedInfo")
        if not isinstance(info, dict) or "rank" not in info:
            raise ValueError("merge: a trace without distributedInfo.rank (not written by "
                             "oneflow.profiler)")
        rank = int(info["rank"])
        world_size = max(world_size, int(info.get("world_size", 1)))
        shift_us = int(info.get("clock_offset_ns", 0)) / 1e3
        for e in trace["traceEvents"]:
            if e.get("ph") == "M" and rank in ranks:
                continue  # the row's names came with this rank's first trace
            e = dict(e, pid=rank)
            if "ts" in e:
                e["ts"] = e["ts"] - shift_us
            events.append(e)
        ranks.add(rank)
    return {
        "schemaVersion": 1,
        "displayTimeUnit": "ms",
        "distributedInfo": {"ranks": sorted(ranks), "world_size": world_size, "merged": True},
        "traceEvents": events,
    }
