"""A 2-stage pipeline (flow.nn.parallel.Pipeline) against one-process training, per rank.

On 2 ranks stage 0 is on rank 0 and stage 1 on rank 1; on 4 ranks each stage is a data-parallel
group (ranks [0, 1] and [2, 3], activations split(0)). The batch is cut into 4 micro-batches;
the reference trains the whole model in one process on the full batch with the same optimizer.
After every step the parameters of each stage equal the reference's (1e-5, float32) on the
ranks holding them, and the mean loss equals the full-batch loss.
    usage: pipeline_train.py gpipe|1f1b sgd|adam
"""

import sys

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from device import DEVICE  # noqa: E402

schedule, opt_name = sys.argv[1], sys.argv[2]
rank, world = flow.env.get_rank(), flow.env.get_world_size()
half = world // 2
P0 = flow.placement(DEVICE, ranks=list(range(half)))
P1 = flow.placement(DEVICE, ranks=list(range(half, world)))
B = flow.sbp.broadcast
SBP = flow.sbp.split(0) if half > 1 else B
TOL = 1e-5
M = 4


def make_stages():
    flow.manual_seed(5)
    s0 = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 24), nn.Tanh())
    s1 = nn.Sequential(nn.Linear(24, 32), nn.Tanh(), nn.Linear(32, 4))
    return s0, s1


def make_opt(params):
    if opt_name == "sgd":
        return flow.optim.SGD(params, lr=0.1, momentum=0.9)
    return flow.optim.Adam(params, lr=1e-2)


ref = nn.Sequential(*make_stages())
ref_opt = make_opt(ref.parameters())
pipe = flow.nn.parallel.Pipeline(list(make_stages()), [P0, P1], loss_fn=nn.MSELoss(),
                                 num_micro_batches=M, schedule=schedule)
opt = make_opt(pipe.parameters())
for st, pl in zip(pipe.stages, (P0, P1)):
    for p in st.parameters():
        assert p.placement == pl and tuple(p.sbp) == (B,), (p.placement, p.sbp)

rng = np.random.RandomState(1)
mine = [s for s, pl in enumerate((P0, P1)) if rank in pl.ranks.tolist()]
for step in range(5):
    xb = rng.randn(16, 16).astype(np.float32)
    yb = rng.randn(16, 4).astype(np.float32)
    ref_opt.zero_grad()
    ref_loss = nn.MSELoss()(ref(flow.tensor(xb)), flow.tensor(yb))
    ref_loss.backward()
    ref_opt.step()

    x = flow.tensor(xb).to_global(placement=P0, sbp=B).to_global(sbp=SBP)
    y = flow.tensor(yb).to_global(placement=P1, sbp=B).to_global(sbp=SBP)
    opt.zero_grad()
    loss = pipe.train_step(x, y)
    opt.step()
    if 1 in mine:
        got = loss.to_global(sbp=B).to_local().item()
        # Micro-batch losses of rows in another order than the full batch: a rounding apart.
        assert abs(got - ref_loss.item()) < TOL, (step, got, ref_loss.item())
    ref_stages = (ref[0], ref[1])
    for s in mine:
        for (name, p), q in zip(pipe.stages[s].named_parameters(), ref_stages[s].parameters()):
            got = p.to_global(sbp=B).to_local().numpy()
            err = np.abs(got - q.detach().numpy()).max()
            assert err < TOL, (step, s, name, err)
print(f"rank {rank} of {world} {schedule} {opt_name} ok", flush=True)
