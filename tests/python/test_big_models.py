"""Models bigger than one machine: what each rank holds (oneflow.cpu's memory statistics),
creation that fills only this rank's shard, layout-invariant random numbers, meta tensors and
modules, and layout changes that never build the whole tensor where it is not needed."""

import os

import numpy as np
import pytest

import oneflow as flow
from test_comm import DIST, free_port, launch


def test_cpu_memory_statistics_count_live_and_peak_bytes():
    flow.cpu.reset_peak_memory_stats()
    before = flow.cpu.memory_allocated()
    x = flow.empty(1024, 1024)  # 4 MiB
    assert flow.cpu.memory_allocated() - before == 4 << 20
    del x
    assert flow.cpu.memory_allocated() == before
    assert flow.cpu.max_memory_allocated() - before == 4 << 20
    flow.cpu.reset_peak_memory_stats()
    assert flow.cpu.max_memory_allocated() == flow.cpu.memory_allocated()
    stats = flow.cpu.memory_stats()
    assert stats["reserved_bytes.all.current"] >= stats["allocated_bytes.all.current"]
    with pytest.raises(ValueError, match=r"oneflow.cpu.memory_stats: expected a CPU device or "
                                         r"None, got 'cuda:0'"):
        flow.cpu.memory_stats("cuda:0")
