"""DDP against one-process training on the union of the ranks' batches.

Every rank builds the same model from one seed and the same full batches; the DDP replica
trains on its own slice of each batch, the reference on the whole batch. After every backward
each parameter's averaged .grad must equal the reference's gradient of the mean over the whole
batch (to 1e-5 of the largest gradient: a sum instead of an average, or a division by the wrong
number of ranks, is off by a factor; Adam's step hides such a factor, its update being
invariant to the gradients' scale), and after every step the parameters must agree to 1e-4.
    usage: ddp_check.py mlp|lenet sgd|adam [no_sync|zero_in_place|-] [bucket_mb]
zero_in_place: zero_grad(set_to_none=False), so each .grad stays a view of its bucket and
backward accumulates into the bucket itself.
"""

import sys

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from oneflow.nn.parallel import DistributedDataParallel as DDP
from tutorial_models import make_model, make_opt

model_name, opt_name = sys.argv[1], sys.argv[2]
accumulate = len(sys.argv) > 3 and sys.argv[3] == "no_sync"
zero_in_place = len(sys.argv) > 3 and sys.argv[3] == "zero_in_place"
bucket_mb = float(sys.argv[4]) if len(sys.argv) > 4 else 25
rank, world = flow.env.get_rank(), flow.env.get_world_size()


per_rank = 4
rng = np.random.RandomState(0)
shape = (per_rank * world, 64) if model_name == "mlp" else (per_rank * world, 3, 32, 32)
batches = [(rng.randn(*shape).astype(np.float32), rng.randint(0, 10, shape[0])) for _ in range(6)]

ref = make_model(model_name)
ref_opt = make_opt(opt_name, ref.parameters())
local = make_model(model_name)
if rank != 0:  # DDP must give every rank rank 0's weights
    with flow.no_grad():
        for p in local.parameters():
            p.add_(1.0)
model = DDP(local, bucket_cap_mb=bucket_mb)
opt = make_opt(opt_name, model.parameters())
loss_fn = nn.CrossEntropyLoss()
mine = slice(rank * per_rank, (rank + 1) * per_rank)

steps = 0
for i, (xb, yb) in enumerate(batches):
    x, y = flow.tensor(xb), flow.tensor(yb)
    if accumulate:
        # Two micro-batches per step: the first under no_sync; the reference sums both halves.
        if i % 2 == 0:
            prev = (x, y)
            with model.no_sync():
                (loss_fn(model(x[mine]), y[mine]) / 2).backward()
            continue
        ref_loss = (loss_fn(ref(prev[0]), prev[1]) + loss_fn(ref(x), y)) / 2
    else:
        ref_loss = loss_fn(ref(x), y)
    ref_loss.backward()
    want = [p.grad.clone() for p in ref.parameters()]
    ref_opt.step()
    ref_opt.zero_grad()

    loss = loss_fn(model(x[mine]), y[mine])
    (loss / 2 if accumulate else loss).backward()
    scale = max(float(g.abs().max()) for g in want)
    for (name, p), g in zip(model.module.named_parameters(), want):
        off = float((p.grad - g).abs().max())
        if not off <= 1e-5 * scale:
            ratio = np.linalg.norm(p.grad.numpy()) / np.linalg.norm(g.numpy())
            raise SystemExit(f"rank {rank} step {steps + 1}: {name}.grad differs from the gradient of "
                             f"the mean over the global batch by {off:.3g} (largest gradient "
                             f"{scale:.3g}; ratio of norms {ratio:.4f})")
    opt.step()
    if steps == 0:
        first_ptrs = [p.grad.data_ptr() for p in model.module.parameters()]
    opt.zero_grad(set_to_none=not zero_in_place)
    steps += 1
    worst = max(float((p - q).abs().max()) for p, q in zip(model.module.parameters(), ref.parameters()))
    if worst > 1e-4:
        raise SystemExit(f"rank {rank} step {steps}: parameters differ from one-process training by {worst}")
stats = model.comm_stats()
assert stats["reductions"] == steps, stats
if model_name == "mlp" and not accumulate and not zero_in_place:
    # .grad unset at backward: each linear weight's gradient is computed in its bucket, so
    # only biases (at most) are copied into the buckets.
    bias_bytes = sum(4 * m.bias.numel() for m in model.module.modules() if isinstance(m, nn.Linear))
    assert stats["copied_bytes"] <= steps * bias_bytes, (stats, bias_bytes)
elif model_name == "lenet":  # convolution weights are computed elsewhere and copied
    assert stats["copied_bytes"] > 0, stats
if zero_in_place:  # every step reduced into the same buckets, which .grad still views
    assert [p.grad.data_ptr() for p in model.module.parameters()] == first_ptrs
print(f"rank {rank}: DDP {model_name} {opt_name}{' no_sync' if accumulate else ''} equals one process "
      f"after {steps} steps ({len(model.bucket_indices())} buckets)")
