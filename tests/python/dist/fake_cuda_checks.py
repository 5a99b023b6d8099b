"""Run by tests/python/test_fake_cuda.py in a process whose environment has ONEFLOW_FAKE_CUDA=1
(or on a GPU): oneflow.cuda's queries, memory statistics, mixed precision and the one-line errors
on the stand-in CUDA device. Prints "<name> ok" per check."""

import sys

import numpy as np

import oneflow as flow
import oneflow.nn as nn

fake = flow.cuda.is_fake()
print(f"fake {fake} available {flow.cuda.is_available()} count {flow.cuda.device_count()} "
      f"reason {flow.cuda.unavailable_reason()!r}", flush=True)

# Memory statistics: PyTorch's names and meaning.
flow.cuda.synchronize()
flow.cuda.reset_peak_memory_stats()
base = flow.cuda.memory_allocated()
x = flow.empty(1024, 1024, device="cuda")  # 4 MiB
assert flow.cuda.memory_allocated() >= base + 4 << 20
y = flow.empty(512, 1024, device="cuda")
peak = flow.cuda.max_memory_allocated()
assert peak >= base + 6 << 20, (peak, base)
del x, y
assert flow.cuda.memory_allocated() == base, (flow.cuda.memory_allocated(), base)
assert flow.cuda.max_memory_allocated() == peak  # the peak stays until reset
flow.cuda.reset_peak_memory_stats()
assert flow.cuda.max_memory_allocated() == base
stats = flow.cuda.memory_stats()
assert stats["allocated_bytes.all.current"] == base
assert stats["allocation.all.allocated"] >= stats["allocation.all.freed"] + 0 >= 2
assert flow.cuda.memory_reserved() >= flow.cuda.memory_allocated()
assert flow.cuda.max_memory_reserved() >= flow.cuda.memory_reserved()
print("memory statistics ok", flush=True)

# Mixed precision on cuda: bf16 autocast and fp16 with GradScaler train float32 weights there.
for dtype, scaler in ((flow.bfloat16, None), (flow.float16, flow.cuda.amp.GradScaler())):
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)).cuda()
    opt = flow.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = flow.randn(64, 16).cuda(), flow.randint(0, 4, (64,)).cuda()
    losses = []
    for _ in range(30):
        with flow.autocast("cuda", dtype=dtype):
            out = model(x)
            assert out.dtype == dtype and out.device == flow.device("cuda:0")
            loss = nn.functional.cross_entropy(out, y)
            assert loss.dtype == flow.float32
        opt.zero_grad()
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        losses.append(loss.item())
    for p in model.parameters():
        assert p.dtype == flow.float32 and p.device == flow.device("cuda:0")
        assert p.grad.dtype == flow.float32 and p.grad.device == flow.device("cuda:0")
    assert losses[-1] < 0.5 * losses[0], losses
print("mixed precision ok", flush=True)

# One-line errors naming the device that does not exist.
n = flow.cuda.device_count()
for call, name in ((lambda: flow.cuda.set_device(n), "set_device"),
                   (lambda: flow.cuda.synchronize(n), "synchronize")):
    try:
        call()
        raise AssertionError(f"{name} of cuda:{n} did not raise")
    except RuntimeError as e:
        assert str(e).startswith(f"oneflow.cuda.{name}: invalid device ordinal {n}: "), str(e)
        assert "\n" not in str(e)
print("errors ok", flush=True)
