"""oneflow.cpu: as torch.cpu (the autocast of oneflow.cpu.amp), and the CPU allocator's memory
statistics with oneflow.cuda's names, so a test or a user sees what each rank holds.

    flow.cpu.reset_peak_memory_stats()
    w = flow.randn(1024, 1024, placement=P, sbp=flow.sbp.split(0))
    flow.cpu.max_memory_allocated()      # bytes: this rank's shard, not the whole tensor
"""

import oneflow._oneflow_internal as _C
from oneflow.cpu import amp  # noqa: F401


def memory_stats(device=None):
    """The CPU allocator's statistics with torch.cuda.memory_stats's keys
    ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
    ...): allocated counts the blocks tensors hold, reserved those and the freed blocks the
    allocator keeps for reuse. device: None or a CPU device (a process has one CPU memory)."""
    _check_cpu(device, "memory_stats")
    return _C.cpu_memory_stats()


def _check_cpu(device, op):
    if device is not None and str(device).split(":")[0] != "cpu":
        raise ValueError(f"oneflow.cpu.{op}: expected a CPU device or None, got {device!r}")


def memory_allocated(device=None):
    """The bytes tensors hold in CPU memory now."""
    return memory_stats()["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    """The most bytes tensors held in CPU memory since the start or reset_peak_memory_stats."""
    return memory_stats()["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    return memory_stats()["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    return memory_stats()["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None):
    """Every peak becomes the current value."""
    _check_cpu(device, "reset_peak_memory_stats")
    _C.cpu_reset_peak_memory_stats()
