"""nn.Graph's training switches on 2 ranks, each against one-process eager training of the same
model on the whole batches (every rank computes the reference itself):

    zero1 | zero2   config.enable_zero(stage): Adam's state split(0) (half on each rank); stage 2
                    reduce-scatters the weight gradients (P -> S(0)) instead of all-reducing
    pipeline        two stages by set_stage on ranks [0] and [1], 4 micro-batches (F0 F1 B0 F2 ..)
    amp_zero2       enable_amp(bfloat16) + GradScaler + ZeRO stage 2: the inf check is agreed by
                    both ranks (the first steps overflow and are skipped on both)
    usage: graph_switches.py zero1|zero2|pipeline|amp_zero2
"""

import sys

import numpy as np

import oneflow as flow
import oneflow.nn as nn

case = sys.argv[1]
rank = flow.env.get_rank()
B, S = flow.sbp.broadcast, flow.sbp.split
ALL = flow.placement("cpu", ranks=[0, 1])
STAGES = [flow.placement("cpu", ranks=[0]), flow.placement("cpu", ranks=[1])]
AMP = case == "amp_zero2"
INIT_SCALE = 2.0 ** 140 if AMP else None  # overflows float32: the first steps find inf


def make_model():
    flow.manual_seed(5)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.GELU(),
                         nn.Linear(32, 4))


class Graph(nn.Graph):
    def __init__(self, model, opt, scaler):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        if case in ("zero1", "zero2", "amp_zero2"):
            self.config.enable_zero(True, stage=1 if case == "zero1" else 2, shard_min_size=1)
        if case == "pipeline":
            self.stage0, self.stage1 = model[:3], model[3:]
            self.stage0.to(nn.graph.GraphModule).set_stage(0, STAGES[0])
            self.stage1.to(nn.graph.GraphModule).set_stage(1, STAGES[1])
            self.config.set_gradient_accumulation_steps(4)
        if AMP:
            self.config.enable_amp(True, dtype=flow.bfloat16)
            self.set_grad_scaler(scaler)

    def build(self, x, y):
        logits = self.stage1(self.stage0(x)) if case == "pipeline" else self.model(x)
        loss = nn.functional.cross_entropy(logits, y)
        loss.backward()
        return loss


ref = make_model()
ref_opt = flow.optim.Adam(ref.parameters(), lr=1e-2)
ref_scaler = flow.amp.GradScaler("cpu", init_scale=INIT_SCALE) if AMP else None
glob = make_model()
if case == "pipeline":
    stage0, stage1 = glob[:3], glob[3:]
    stage0.to_global(placement=STAGES[0], sbp=B)
    stage1.to_global(placement=STAGES[1], sbp=B)
else:
    glob.to_global(placement=ALL, sbp=B)
opt = flow.optim.Adam(glob.parameters(), lr=1e-2)
scaler = flow.amp.GradScaler("cpu", init_scale=INIT_SCALE) if AMP else None
g = Graph(glob, opt, scaler)

rng = np.random.RandomState(0)
for step in range(5):
    xb, yb = rng.randn(8, 16).astype(np.float32), rng.randint(0, 4, 8)
    x, y = flow.tensor(xb), flow.tensor(yb)
    with flow.autocast("cpu", dtype=flow.bfloat16, enabled=AMP):
        ref_loss = nn.functional.cross_entropy(ref(x), y)
    ref_opt.zero_grad()
    if AMP:
        ref_scaler.scale(ref_loss).backward()
        ref_scaler.step(ref_opt)
        ref_scaler.update()
    else:
        ref_loss.backward()
        ref_opt.step()
    if case == "pipeline":
        gx = x.to_global(placement=STAGES[0], sbp=B)
        gy = y.to_global(placement=STAGES[1], sbp=B)
    else:
        gx = x.to_global(placement=ALL, sbp=B).to_global(sbp=S(0))
        gy = y.to_global(placement=ALL, sbp=B).to_global(sbp=S(0))
    loss = g(gx, gy)
    whole = loss.to_global(placement=ALL, sbp=B).to_local().numpy()
    expect = ref_loss.numpy()
    got = whole.mean() if case == "pipeline" else whole  # the 4 micro-batches' losses
    assert abs(float(got) - float(expect)) < 1e-5, (step, got, expect)
    if AMP:
        assert scaler.get_scale() == ref_scaler.get_scale(), (scaler.get_scale(),
                                                              ref_scaler.get_scale())

for (name, p), q in zip(glob.named_parameters(), ref.parameters()):
    whole = p.to_global(placement=ALL, sbp=B).to_local().numpy()
    np.testing.assert_allclose(whole, q.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert tuple(p.sbp) == (B,), (name, p.sbp)  # parameters whole again after each update

text = repr(g)
assert g._compiled and len(g._compiled) == 1
if case.startswith("zero") or AMP:
    for p in glob.parameters():
        state = opt.state[p]
        assert tuple(state["exp_avg"].sbp) == (S(0),), state["exp_avg"].sbp
        local = state["exp_avg"].to_local()
        assert local.numel() < p.numel(), (local.shape, p.shape)  # this rank's part only
    boxing = "\n".join(line for line in text.splitlines() if "= to_global(" in line)
    if case == "zero1":  # the weight gradients are all-reduced, then sliced
        assert "(P) -> B" in boxing and "(P) -> S(0)" not in boxing, boxing
    else:  # stage 2: reduce-scattered, never all-reduced (AMP: the inf count is, once)
        flags = 1 if AMP else 0
        assert "(P) -> S(0)" in boxing and boxing.count("(P) -> B") == flags, boxing
if case == "pipeline":
    # 2 stages: F0 F1 B0 F2 B1 F3 B2 B3 (3 linears a forward; a backward starts at its seed)
    names = [line.split("(")[0].split("= ")[-1] for line in text.splitlines() if " = " in line]
    order = "".join("F" if n == "linear" else "B" for n in names if n in ("linear", "full_like"))
    assert order == "FFF" * 2 + "B" + "FFF" + "B" + "FFF" + "BB", order
if AMP:
    assert ref_scaler.get_scale() < INIT_SCALE  # steps were skipped, the scale backed off
print(f"rank {rank} graph {case} ok", flush=True)
