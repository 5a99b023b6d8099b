"""ZeroRedundancyOptimizer against one-process training, per rank (run through the launcher).

Every rank builds the same model from one seed and the same full batches. The reference trains
a local copy with the plain optimizer; the ZeRO run puts the model on flow.sbp.broadcast, the
batch on split(0), and wraps the same optimizer class. Checked on every rank:
  - the parameters after every step equal the reference's (1e-5, float32), and stay broadcast;
  - every state tensor is split(0) (or keeps the parameter's split) and this rank's bytes of
    state are exactly its balanced share of the whole (uneven splits included): summed over the
    ranks they are the plain global optimizer's bytes, which every rank holds whole;
  - state_dict (gathered single file and sharded directory) round trips: a fresh model and
    ZeRO optimizer loaded from either continue exactly like the reference; the moments equal
    the reference optimizer's; a plain optimizer's state dict loads into ZeRO and back.
    usage: zero_train.py adamw|adam|sgd CKPT_DIR
"""

import os
import sys

import numpy as np

import oneflow as flow
import oneflow.nn as nn
from device import DEVICE  # noqa: E402

opt_name, ckpt = sys.argv[1], sys.argv[2]
rank, world = flow.env.get_rank(), flow.env.get_world_size()
P = flow.placement(DEVICE, ranks=list(range(world)))
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
TOL = 1e-5


def make_model():
    flow.manual_seed(11)
    # 7 and 3 rows: uneven over 2 and 4 ranks (a bias of 3 on 4 ranks leaves rank 3 no row).
    return nn.Sequential(nn.Linear(13, 64), nn.Tanh(), nn.Linear(64, 7), nn.Tanh(), nn.Linear(7, 3))


OPTS = {
    "adamw": (flow.optim.AdamW, dict(lr=1e-2, weight_decay=0.1), ("exp_avg", "exp_avg_sq")),
    "adam": (flow.optim.Adam, dict(lr=1e-2, amsgrad=True), ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")),
    "sgd": (flow.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True), ("momentum_buffer",)),
}
opt_class, opt_kw, state_keys = OPTS[opt_name]

rng = np.random.RandomState(0)
batches = [(rng.randn(10, 13).astype(np.float32), rng.randn(10, 3).astype(np.float32))
           for _ in range(8)]


def global_batch(xb, yb):
    x = flow.tensor(xb).to_global(placement=P, sbp=B).to_global(sbp=S0)
    y = flow.tensor(yb).to_global(placement=P, sbp=B).to_global(sbp=S0)
    return x, y


def train_step(model, opt, xb, yb, is_global):
    x, y = global_batch(xb, yb) if is_global else (flow.tensor(xb), flow.tensor(yb))
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def check_same(model, ref, what):
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert p.is_global and tuple(p.sbp) == (B,), (what, name, p.sbp)
        err = np.abs(p.detach().numpy() - q.detach().numpy()).max()
        assert err < TOL, (what, name, err)


def whole(t):
    return t.to_global(sbp=[B] * len(t.sbp)).to_local().numpy() if t.is_global else t.numpy()


ref = make_model()
ref_opt = opt_class(ref.parameters(), **opt_kw)
model = make_model().to_global(placement=P, sbp=B)
opt = flow.distributed.ZeroRedundancyOptimizer(model.parameters(), optimizer_class=opt_class, **opt_kw)
plain = make_model().to_global(placement=P, sbp=B)
plain_opt = opt_class(plain.parameters(), **opt_kw)

for step, (xb, yb) in enumerate(batches[:5]):
    ref_loss = train_step(ref, ref_opt, xb, yb, False)
    loss = train_step(model, opt, xb, yb, True)
    train_step(plain, plain_opt, xb, yb, True)
    assert abs(loss.item() - ref_loss.item()) < TOL, (step, loss.item(), ref_loss.item())
    check_same(model, ref, f"step {step}")

# ---- memory: this rank's share of every state tensor
mine = opt.state_bytes_per_rank()
plain_bytes = sum(t.to_local().numel() * 4 for s in plain_opt.state.values() for k, t in s.items()
                  if isinstance(t, flow.Tensor) and t.ndim > 0)  # step counts aside
expected = 0
for p in model.parameters():
    rows = p.shape[0]
    share = rows // world + (1 if rank < rows % world else 0)
    expected += len(state_keys) * share * (p.numel() // rows) * 4
    st = opt.state[opt.shard_of(p)]
    for k in state_keys:
        t = st[k]
        assert t.is_global and tuple(t.sbp) == (S0,), (k, t.sbp)
        assert tuple(t.shape) == tuple(p.shape), (k, t.shape, p.shape)
        assert t.to_local().shape[0] == share, (k, t.to_local().shape, share)
assert mine == expected, (mine, expected)
total = flow.tensor([float(mine)]).to_global(placement=P, sbp=flow.sbp.partial_sum)
total = int(total.to_global(sbp=B).to_local().item())
assert total == plain_bytes, (total, plain_bytes)
print(f"rank {rank} of {world} {opt_name} state bytes {mine} of {plain_bytes} "
      f"(ratio {plain_bytes / mine:.2f})", flush=True)

# ---- state dict: the moments are the reference's, in shard layout
sd = opt.state_dict()
ref_sd = ref_opt.state_dict()
assert sd["state"]["step"] == ref_sd["state"]["step"]  # OneFlow's count: one per optimizer
per_param = {i: st for i, st in sd["state"].items() if i != "step"}
assert sorted(per_param) == sorted(i for i in ref_sd["state"] if i != "step"), sorted(per_param)
for i, st in per_param.items():
    for k in state_keys:
        assert st[k].is_global and tuple(st[k].sbp) == (S0,), (i, k, st[k].sbp)
        err = np.abs(whole(st[k]) - ref_sd["state"][i][k].numpy()).max()
        assert err < TOL, (i, k, err)
assert sd["param_groups"][0]["lr"] == opt_kw["lr"]

single = os.path.join(ckpt, f"zero_{opt_name}_{world}.pt")
sharded = os.path.join(ckpt, f"zero_{opt_name}_{world}_dir")
flow.save(sd, single)           # gathered, one file (rank 0 writes)
flow.save(sd, sharded, sharded=True)   # each rank its own shards
flow.save(model.state_dict(), sharded + "_model", sharded=True)
flow.comm.barrier()

copies = []
for source in (single, sharded, "plain"):
    m = make_model().to_global(placement=P, sbp=B)
    m.load_state_dict(flow.load(sharded + "_model"))
    o = flow.distributed.ZeroRedundancyOptimizer(m.parameters(), optimizer_class=opt_class, lr=123.0)
    o.load_state_dict(plain_opt.state_dict() if source == "plain" else flow.load(source))
    assert o.param_groups[0]["lr"] == opt_kw["lr"], (source, o.param_groups[0]["lr"])
    mine_after = o.state_bytes_per_rank()
    assert mine_after == expected, (source, mine_after, expected)
    copies.append((source, m, o))

# And the other way: ZeRO's state into the plain optimizer.
back = make_model().to_global(placement=P, sbp=B)
back.load_state_dict(model.state_dict())
back_opt = opt_class(back.parameters(), **opt_kw)
back_opt.load_state_dict(opt.state_dict())
for st in back_opt.state.values():
    for k in state_keys:
        st[k] = st[k].to_global(sbp=B)  # a plain optimizer keeps state in the parameter's layout
copies.append(("into plain", back, back_opt))

for step, (xb, yb) in enumerate(batches[5:]):
    train_step(ref, ref_opt, xb, yb, False)
    train_step(model, opt, xb, yb, True)
    for source, m, o in copies:
        train_step(m, o, xb, yb, True)
for source, m, o in [("continued", model, opt)] + copies:
    check_same(m, ref, f"after loading {source}")
print(f"rank {rank} of {world} {opt_name} ok", flush=True)
