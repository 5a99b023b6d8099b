"""nn.Graph data parallel on global tensors, checked against one-process eager training.

Every rank builds the same MLP from one seed. The graph trains the model on broadcast
parameters with split(0) batches (the gradient all-reduce is the boxing P -> B inside the plan);
the reference trains a local copy eagerly on the full batches. Losses and weights agree to 1e-5.
    usage: graph_train.py sgd|adamw
"""

import sys

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from tutorial_models import make_model

opt_name = sys.argv[1]
rank = flow.env.get_rank()
P = flow.placement("cpu", ranks=list(range(flow.env.get_world_size())))


def make_opt(params):
    if opt_name == "sgd":
        return flow.optim.SGD(params, lr=0.05, momentum=0.9)
    return flow.optim.AdamW(params, lr=1e-2, weight_decay=0.05)


class TrainGraph(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()
        self.add_optimizer(opt)
        self.builds = 0

    def build(self, x, y):
        self.builds += 1
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


rng = np.random.RandomState(0)
data = [(rng.randn(7, 64).astype(np.float32), rng.randint(0, 10, 7)) for _ in range(5)]

ref = make_model("mlp")
ref_opt = make_opt(ref.parameters())
glob = make_model("mlp").to_global(placement=P, sbp=flow.sbp.broadcast)
g = TrainGraph(glob, make_opt(glob.parameters()))
loss_fn = nn.CrossEntropyLoss()

for step, (xb, yb) in enumerate(data):
    x, y = flow.tensor(xb), flow.tensor(yb)
    ref_loss = loss_fn(ref(x), y)
    ref_opt.zero_grad()
    ref_loss.backward()
    ref_opt.step()

    gx = x.to_global(placement=P, sbp=flow.sbp.broadcast).to_global(sbp=flow.sbp.split(0))
    gy = y.to_global(placement=P, sbp=flow.sbp.broadcast).to_global(sbp=flow.sbp.split(0))
    loss = g(gx, gy)
    assert loss.is_global, loss
    diff = abs(loss.item() - ref_loss.item())
    assert diff < 1e-5, (step, loss.item(), ref_loss.item())

assert g.builds == 1, g.builds
# Another input layout is another signature: broadcast batches compile a second plan.
bx = flow.tensor(data[0][0]).to_global(placement=P, sbp=flow.sbp.broadcast)
by = flow.tensor(data[0][1]).to_global(placement=P, sbp=flow.sbp.broadcast)
snapshot = [p.to_local().numpy().copy() for p in glob.parameters()]
g(bx, by)
assert g.builds == 2 and len(g._compiled) == 2, g.builds
for p, q in zip(glob.parameters(), snapshot):
    p.to_local().copy_(flow.tensor(q))  # undo that step, so the comparison below still holds
text = repr(g)
# The plan shows each op's signature and the gradient all-reduce as a P -> B layout change.
assert "[model.1]  (S(0), B, B) -> S(0)" in text and "to_global(" in text, text
assert "(P) -> B" in text and "sgd_update(" in text or "adam_update(" in text, text
# The weight gradient's matmul: deduction picks (S(1), S(0)) -> P, no boxing needed.
assert "deduced ((S(1)), (S(0))) -> ((P))" in text, text
for (name, p), q in zip(glob.named_parameters(), ref.parameters()):
    assert p.is_global and p.sbp == (flow.sbp.broadcast,), (name, p.sbp)
    np.testing.assert_allclose(p.to_local().numpy(), q.numpy(), rtol=1e-5, atol=1e-5)
print(f"rank {rank} graph train ok", flush=True)
