"""Run by tests/python/test_sync_debug.py in a process whose environment has ONEFLOW_FAKE_CUDA=1
(and by tests/python/test_cuda.py on a GPU): oneflow.cuda.set_sync_debug_mode reports every host
wait on CUDA work, naming the op, and a training step (GPT in fp32 and under bf16 autocast with
AdamW, clip_grad_norm and dropout; a ResNet with SGD) runs under "error", i.e. without one.
Prints "<name> ok" per check; argv picks the checks (all by default)."""

import math
import os
import sys
import warnings

import numpy as np

import oneflow as flow
import oneflow.nn as nn
import oneflow.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "oneflow", "python"))

SYNC = "called a synchronizing CUDA operation"


def expect_raise(fn, *needles):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (the message is what is checked)
        msg = str(e)
        for n in needles:
            assert n in msg, (n, msg)
        return msg
    raise AssertionError(f"no error; expected one with {needles}")


def check_modes():
    assert flow.cuda.get_sync_debug_mode() == 0
    for mode, value in (("warn", 1), ("error", 2), ("default", 0), (1, 1), (2, 2), (0, 0)):
        flow.cuda.set_sync_debug_mode(mode)
        assert flow.cuda.get_sync_debug_mode() == value, (mode, flow.cuda.get_sync_debug_mode())
    expect_raise(lambda: flow.cuda.set_sync_debug_mode("loud"),
                 "oneflow.cuda.set_sync_debug_mode: expected one of 'default', 'warn', 'error' "
                 "(or 0, 1, 2), got 'loud'")
    expect_raise(lambda: flow.cuda.set_sync_debug_mode(3),
                 "oneflow.cuda.set_sync_debug_mode: expected 0, 1 or 2, got 3")
    expect_raise(lambda: flow.cuda.set_sync_debug_mode(1.0), "got float 1.0")
    assert flow.cuda.get_sync_debug_mode() == 0
    print("modes ok", flush=True)


def check_reports():
    x = flow.arange(6, dtype=flow.float32).to("cuda")  # before the mode: a host-to-device copy
    flow.cuda.set_sync_debug_mode("error")
    try:
        # PyTorch's rule: reading a value on the host is a synchronizing operation.
        expect_raise(lambda: x.sum().item(),
                     f"Tensor.item: {SYNC} (a copy from cuda:0 to cpu), reported by "
                     'oneflow.cuda.set_sync_debug_mode("error")')
        expect_raise(lambda: x.numpy(), f"Tensor.numpy: {SYNC} (a copy from cuda:0 to cpu)")
        expect_raise(lambda: x.tolist(), f"Tensor.tolist: {SYNC}")
        expect_raise(lambda: bool(x.sum() > 0), f"Tensor.item: {SYNC}")
        expect_raise(lambda: x.to("cpu"), f"{SYNC} (a copy from cuda:0 to cpu)")
        expect_raise(lambda: flow.tensor([1.0, 2.0], device="cuda"), f"{SYNC} (a copy from cpu to cuda:0)")
        # An op whose CUDA path reads device values on the host names itself.
        r = flow.ones(6, dtype=flow.int64, device="cuda")
        expect_raise(lambda: flow.repeat_interleave(x, r), f"repeat_interleave: {SYNC}")
        expect_raise(lambda: flow.unique(x), f"unique: {SYNC}")
        # No wait: Python scalars are kernel arguments, ops queue work, the user's own
        # synchronize is not reported.
        y = (x + 1) * 2.5 - True
        y = y.masked_fill(y > 3, float("-inf")).clamp(min=-1.0)
        flow.cuda.synchronize()
    finally:
        flow.cuda.set_sync_debug_mode("default")
    assert y.numpy().tolist() == [1.5, -1.0, -1.0, -1.0, -1.0, -1.0], y.numpy()

    flow.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            v = x.sum().item()
        assert v == 15.0
        assert len(caught) == 1 and issubclass(caught[0].category, UserWarning), caught
        assert str(caught[0].message) == (f"Tensor.item: {SYNC} (a copy from cuda:0 to cpu), "
                                          'reported by oneflow.cuda.set_sync_debug_mode("warn")')
        # The warnings filter decides: "error" makes the warning raise.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            expect_raise(lambda: x.sum().item(), f"Tensor.item: {SYNC}")
    finally:
        flow.cuda.set_sync_debug_mode("default")
    print("reports ok", flush=True)


class DropGPT(nn.Module):
    """examples/gpt.py's GPT with dropout after the embedding and on each block's output."""

    def __init__(self, p=0.1, **kw):
        super().__init__()
        import gpt

        self.gpt = gpt.GPT(**kw)
        self.drop = nn.Dropout(p)

    def forward(self, idx, targets):
        g = self.gpt
        x = self.drop(g.embed(idx))
        for block in g.h:
            x = F.dropout(block(x), 0.1, training=self.training)
        logits = g.head(x)
        return g.head.loss(logits, targets)


def gpt_step_losses(autocast_dtype, steps=3, host_read=False):
    flow.manual_seed(0)
    model = DropGPT(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16).to("cuda")
    opt = flow.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    rng = np.random.RandomState(0)
    batches = [(flow.tensor(rng.randint(0, 11, (2, 8))).to("cuda"),
                flow.tensor(rng.randint(0, 11, (2, 8))).to("cuda")) for _ in range(steps)]
    losses = []
    for idx, tgt in batches:
        flow.cuda.set_sync_debug_mode("error")
        try:
            if autocast_dtype is None:
                loss = model(idx, tgt)
            else:
                with flow.autocast("cuda", dtype=autocast_dtype):
                    loss = model(idx, tgt)
            opt.zero_grad()
            loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if host_read:
                print(float(norm))  # a deliberate host read inside the step
            opt.step()
        finally:
            flow.cuda.set_sync_debug_mode("default")
        losses.append(loss.item())
    return losses


def check_gpt():
    fp32 = gpt_step_losses(None)
    bf16 = gpt_step_losses(flow.bfloat16)
    assert all(math.isfinite(v) for v in fp32 + bf16), (fp32, bf16)
    assert fp32[-1] < fp32[0] + 0.5 and abs(bf16[0] - fp32[0]) < 0.05 * abs(fp32[0]), (fp32, bf16)
    expect_raise(lambda: gpt_step_losses(None, steps=1, host_read=True), f"Tensor.item: {SYNC}")
    print("gpt step ok", flush=True)


def check_resnet():
    from flowvision.models import resnet18

    flow.manual_seed(0)
    model = resnet18(num_classes=10).to("cuda")
    opt = flow.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = flow.randn(2, 3, 32, 32).to("cuda")
    y = flow.tensor([1, 7]).to("cuda")
    losses = []
    for _ in range(2):
        flow.cuda.set_sync_debug_mode("error")
        try:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        finally:
            flow.cuda.set_sync_debug_mode("default")
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses), losses
    print("resnet step ok", flush=True)


CHECKS = {"modes": check_modes, "reports": check_reports, "gpt": check_gpt, "resnet": check_resnet}

if __name__ == "__main__":
    assert flow.cuda.is_available(), "needs a CUDA device or ONEFLOW_FAKE_CUDA=1"
    for name in sys.argv[1:] or list(CHECKS):
        CHECKS[name]()
