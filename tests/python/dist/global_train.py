"""The OneFlow global-tensor tutorial pattern, checked against one-process training.

Every rank builds the same model from one seed and the same full batches. The global run puts
the model on flow.sbp.broadcast and each batch on flow.sbp.split(0); the reference trains a
local copy on the full batches. Losses and final weights must agree to 1e-4.
    usage: global_train.py mlp|lenet sgd|adam
"""

import sys

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from tutorial_models import make_model, make_opt
from device import DEVICE  # noqa: E402

model_name, opt_name = sys.argv[1], sys.argv[2]
rank = flow.env.get_rank()
P = flow.placement(DEVICE, ranks=list(range(flow.env.get_world_size())))


rng = np.random.RandomState(0)
shape = (8, 64) if model_name == "mlp" else (7, 3, 32, 32)  # 7: uneven over 2 ranks
batches = [(rng.randn(*shape).astype(np.float32), rng.randint(0, 10, shape[0]))
           for _ in range(4)]

ref = make_model(model_name)
ref_opt = make_opt(opt_name, ref.parameters())
glob = make_model(model_name).to_global(placement=P, sbp=flow.sbp.broadcast)
glob_opt = make_opt(opt_name, glob.parameters())
loss_fn = nn.CrossEntropyLoss()

for step, (xb, yb) in enumerate(batches):
    x, y = flow.tensor(xb), flow.tensor(yb)
    ref_loss = loss_fn(ref(x), y)
    ref_opt.zero_grad()
    ref_loss.backward()
    ref_opt.step()

    gx = x.to_global(placement=P, sbp=flow.sbp.broadcast).to_global(sbp=flow.sbp.split(0))
    gy = y.to_global(placement=P, sbp=flow.sbp.broadcast).to_global(sbp=flow.sbp.split(0))
    loss = loss_fn(glob(gx), gy)
    glob_opt.zero_grad()
    loss.backward()
    glob_opt.step()
    diff = abs(loss.item() - ref_loss.item())
    assert diff < 1e-4, (step, loss.item(), ref_loss.item())

for (name, p), q in zip(glob.named_parameters(), ref.parameters()):
    assert p.is_global and p.sbp == (flow.sbp.broadcast,), (name, p.sbp)
    err = np.abs(p.detach().numpy() - q.detach().numpy()).max()
    assert err < 1e-4, (name, err)
print(f"rank {rank} {model_name} {opt_name} ok loss {loss.item():.6f}", flush=True)
