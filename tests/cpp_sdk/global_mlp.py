"""global_mlp.cc in Python: the same data, seed, model and steps; rank 0 prints each loss."""
import oneflow as flow
import oneflow.nn as nn

world = flow.placement("cpu", ranks=list(range(flow.env.get_world_size())))
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
flow.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
x, y = flow.randn(32, 8), flow.randint(0, 3, (32,))
model.to_global(placement=world, sbp=B)
xg = x.to_global(placement=world, sbp=B).to_global(sbp=S0)
yg = y.to_global(placement=world, sbp=B).to_global(sbp=S0)
opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(5):
    loss = nn.functional.cross_entropy(model(xg), yg)
    opt.zero_grad()
    loss.backward()
    opt.step()
    whole = loss.to_global(sbp=B).to_local()
    if flow.env.get_rank() == 0:
        print(f"step {step} loss {whole.item():.8f}")
